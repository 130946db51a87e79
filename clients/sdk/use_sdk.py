"""Drive the running service with the client generated from spec/openapi.yaml, and nothing else.

Every request goes through the generated typed functions (`riskapi_client.api.*`) with the generated
models as bodies; every answer is read through the generated models. No raw dicts, no raw HTTP.
Run by clients/sdk/run.py (`tox -e sdk`), which generates and installs the client, serves the app on
a fresh SQLite database and creates the agency, its token and its risk profile:

    python clients/sdk/use_sdk.py --base-url http://127.0.0.1:PORT/api/v1 --token TOKEN --risk UUID
"""

import argparse
import datetime
import sys
from uuid import UUID, uuid4

from riskapi_client import AuthenticatedClient
from riskapi_client.api.buildings import create_buildings, list_buildings
from riskapi_client.api.drivers import create_drivers, list_drivers
from riskapi_client.api.events import get_event, list_event_types, list_events, publish_event
from riskapi_client.api.premises import create_premises, list_premises
from riskapi_client.api.risk_data import delete_risk_data, override_risk_data, update_risk_data
from riskapi_client.api.vehicles import create_vehicles, list_vehicles
from riskapi_client.api.webhooks import (
    create_webhooks,
    delete_webhooks,
    get_delivery,
    list_deliveries,
    list_webhooks,
    ping_webhook,
    recover_deliveries,
    redeliver,
    rotate_secret,
    update_webhooks,
)
from riskapi_client.models import (
    Address,
    AddressCreateData,
    AddressUpdateData,
    AddressUpdateItem,
    AddressUpdateItemObject,
    BooleanFilter,
    BuildingCreate,
    BuildingCreateData,
    BuildingCreateItem,
    BuildingCreateItemObject,
    BuildingInclude,
    BuildingUpdateData,
    BuildingUpdateItem,
    BuildingUpdateItemObject,
    BulkDelete,
    BulkDeleteItem,
    BulkUpdate,
    ChangedObjectList,
    DeletedObject,
    DeletedObjectList,
    DeletedWebhookList,
    DeliveryItem,
    DeliveryPage,
    DriverCreate,
    DriverCreateData,
    DriverCreateItem,
    DriverCreateItemObject,
    DriverInclude,
    DriverList,
    DriverPage,
    DriverUpdateData,
    DriverUpdateItem,
    DriverUpdateItemObject,
    EventAccepted,
    EventItem,
    EventName,
    EventPage,
    EventTypeList,
    IsDisabledFilter,
    ListDeliveriesSortItem,
    ListDriversSortItem,
    NestedAddressCreate,
    ObjectKind,
    OverrideDelete,
    OverrideDeleteMethod,
    OverrideUpdate,
    OverrideUpdateMethod,
    PingAccepted,
    PrecognitionFlag,
    Premise,
    PremiseCreate,
    PremiseCreateData,
    PremiseCreateItem,
    PremiseCreateItemObject,
    PremiseList,
    PremiseUpdateData,
    PremiseUpdateItem,
    PremiseUpdateItemObject,
    PublishEvent,
    PublishEventData,
    PublishEventEvent,
    RecoveryItem,
    StateCode,
    UpdatedDriver,
    UpdatedObjectList,
    ValidationError,
    VehicleCreate,
    VehicleCreateData,
    VehicleCreateItem,
    VehicleCreateItemObject,
    VehicleList,
    VehiclePage,
    VehicleUpdateData,
    VehicleUpdateItem,
    VehicleUpdateItemObject,
    WebhookCreate,
    WebhookCreateData,
    WebhookCreateDataItem,
    WebhookCreateDataItemObject,
    WebhookDelete,
    WebhookDeleteDataItem,
    WebhookDeleteDataItemObject,
    WebhookList,
    WebhookPage,
    WebhookRecover,
    WebhookType,
    WebhookUpdate,
    WebhookUpdateData,
    WebhookUpdateDataItem,
    WebhookUpdateDataItemObject,
)

RESULTS = {"passed": 0, "failed": 0}


def check(label: str, condition: bool, detail="") -> None:
    """Record and print one check."""
    RESULTS["passed" if condition else "failed"] += 1
    print(f"{'ok  ' if condition else 'FAIL'} {label}" + ("" if condition else f": {detail}"), flush=True)


def driver_item(**data) -> DriverCreateItem:
    return DriverCreateItem(object_=DriverCreateItemObject.DRIVER, data=DriverCreateData(**data))


class Session:
    """The generated client bound to one agency and one risk profile."""

    def __init__(self, base_url: str, token: str, risk: str):
        self.client = AuthenticatedClient(base_url=base_url, token=token, raise_on_unexpected_status=True, timeout=60)
        self.risk = risk

    def drivers(self, **params) -> DriverPage:
        response = list_drivers.sync_detailed(self.risk, client=self.client, **params)
        assert isinstance(response.parsed, DriverPage), (response.status_code, response.content)
        return response.parsed

    def numbers(self, **params) -> list[int]:
        return [d.data.number for d in self.drivers(sort=[ListDriversSortItem.NUMBER], **params).data]

    def deliveries(self, webhook: UUID, **params) -> DeliveryPage:
        response = list_deliveries.sync_detailed(str(webhook), client=self.client, **params)
        assert isinstance(response.parsed, DeliveryPage), (response.status_code, response.content)
        return response.parsed

    def webhooks(self, **params) -> set[UUID]:
        response = list_webhooks.sync_detailed(client=self.client, **params)
        assert isinstance(response.parsed, WebhookPage), (response.status_code, response.content)
        return {w.uuid for w in response.parsed.data}


def webhooks_first(s: Session) -> dict:
    """Subscribe two webhooks before any data exists, so every later write is delivered to them."""
    body = WebhookCreate(
        data=[
            WebhookCreateDataItem(
                object_=WebhookCreateDataItemObject.WEBHOOK,
                data=WebhookCreateData(
                    type_=WebhookType.CUSTOM,
                    url="https://localhost/hooks/crm",
                    events=[EventName.DRIVER_CREATED, EventName.FORM_COMPLETED],
                    description="CRM sync",
                ),
            ),
            WebhookCreateDataItem(
                object_=WebhookCreateDataItemObject.WEBHOOK,
                data=WebhookCreateData(
                    type_=WebhookType.ZAPIER, url="https://localhost/hooks/zap", events=[EventName.VEHICLE_CREATED]
                ),
            ),
        ]
    )
    response = create_webhooks.sync_detailed(client=s.client, body=body)
    created = response.parsed
    check("createWebhooks: 201 with two typed webhooks", response.status_code == 201 and isinstance(created, WebhookList))
    crm, zap = created.data
    check("createWebhooks: a signing secret each", crm.meta.signing_secret.startswith("whsec_") and crm.data.disabled is None)
    return {"crm": crm, "zap": zap}


def risk_data(s: Session) -> dict:
    """Create vehicles, premises, buildings and drivers (with and without addresses)."""
    vehicles = create_vehicles.sync_detailed(
        s.risk,
        client=s.client,
        body=VehicleCreate(
            data=[
                VehicleCreateItem(
                    object_=VehicleCreateItemObject.VEHICLE, data=VehicleCreateData(year=2019, make="Ford", model="F-150")
                ),
                VehicleCreateItem(object_=VehicleCreateItemObject.VEHICLE, data=VehicleCreateData(year=2021, make="Toyota")),
            ]
        ),
    ).parsed
    check("createVehicles: typed VehicleList", isinstance(vehicles, VehicleList) and len(vehicles.data) == 2)
    ford, toyota = vehicles.data
    found = list_vehicles.sync_detailed(s.risk, client=s.client, filtersearch="ford").parsed
    check(
        "listVehicles filter[search] (contains on make/model/VIN)",
        isinstance(found, VehiclePage) and [v.uuid for v in found.data] == [ford.uuid],
    )
    found = list_vehicles.sync_detailed(s.risk, client=s.client, filteryear="2021").parsed
    check("listVehicles filter[year] (exact integer)", [v.uuid for v in found.data] == [toyota.uuid])

    premises = create_premises.sync_detailed(
        s.risk,
        client=s.client,
        body=PremiseCreate(
            data=[
                PremiseCreateItem(
                    object_=PremiseCreateItemObject.PREMISE,
                    data=PremiseCreateData(address="1 Main St", city="Austin", state=StateCode.TX, zip_="78701"),
                ),
                PremiseCreateItem(
                    object_=PremiseCreateItemObject.PREMISE, data=PremiseCreateData(city="Fresno", state=StateCode.CA)
                ),
            ]
        ),
    ).parsed
    check("createPremises: typed PremiseList", isinstance(premises, PremiseList) and len(premises.data) == 2)
    austin, fresno = premises.data
    found = list_premises.sync_detailed(s.risk, client=s.client, filterstate="CA").parsed
    check("listPremises filter[state] (exact enum)", [p.uuid for p in found.data] == [fresno.uuid])

    buildings = create_buildings.sync_detailed(
        s.risk,
        client=s.client,
        include=[BuildingInclude.PREMISE],
        body=BuildingCreate(
            data=[
                BuildingCreateItem(object_=BuildingCreateItemObject.BUILDING, data=BuildingCreateData(premise=austin.uuid)),
                BuildingCreateItem(object_=BuildingCreateItemObject.BUILDING, data=BuildingCreateData(premise=fresno.uuid)),
            ]
        ),
    ).parsed
    check(
        "createBuildings include=premise: relations.premise is a typed Premise",
        isinstance(buildings.data[0].relations.premise, Premise) and buildings.data[0].relations.premise.uuid == austin.uuid,
    )
    on_fresno = list_buildings.sync_detailed(s.risk, client=s.client, filterpremise=str(fresno.data.number)).parsed
    check(
        "listBuildings filter[premise] (reference by number), without include: the premise's UUID",
        [b.uuid for b in on_fresno.data] == [buildings.data[1].uuid] and on_fresno.data[0].relations.premise == fresno.uuid,
    )

    address = NestedAddressCreate(data=AddressCreateData(address="9 Elm St", city="Austin", state=StateCode.TX, zip_="78702"))
    response = create_drivers.sync_detailed(
        s.risk,
        client=s.client,
        include=[DriverInclude.ADDRESS],
        body=DriverCreate(
            data=[
                driver_item(
                    first_name="Ann",
                    last_name="Lee",
                    license_state=StateCode.TX,
                    is_employee=True,
                    license_expiration=datetime.date(2027, 3, 1),
                    year_licensed=2001,
                    vehicle=ford.uuid,
                    address=address,
                ),
                driver_item(first_name="Bob", last_name="Jones", license_state=StateCode.NY, is_employee=False),
                driver_item(first_name="Hannah", license_state=StateCode.CA, license_expiration=datetime.date(2026, 1, 1)),
                driver_item(
                    first_name="Jon", last_name="Leeds", is_employee=None, year_licensed=2010, vehicle=toyota.data.number
                ),
            ]
        ),
    )
    drivers = response.parsed
    check(
        "createDrivers (with and without address): 201, typed DriverList",
        response.status_code == 201 and isinstance(drivers, DriverList),
    )
    ann, bob, hannah, jon = drivers.data
    check("createDrivers: Ann's relations.address is a typed Address", isinstance(ann.relations.address, Address))
    check("createDrivers: Bob has no address (null parsed as None)", bob.relations.address is None)
    check("createDrivers: numbers assigned 1..4", [d.data.number for d in drivers.data] == [1, 2, 3, 4])
    return {
        "ford": ford,
        "toyota": toyota,
        "austin": austin,
        "fresno": fresno,
        "buildings": buildings.data,
        "drivers": drivers.data,
    }


def filters(s: Session, made: dict) -> None:
    """Every filter kind reaches the server and changes the result."""
    ann, bob, hannah, jon = made["drivers"]
    everyone = s.numbers()
    check("listDrivers unfiltered", everyone == [1, 2, 3, 4], everyone)
    today = datetime.date.today().isoformat()
    cases = [
        ("filter[first_name] contains", {"filterfirst_name": "AN"}, [1, 3]),
        ("filter[search] on first and last names", {"filtersearch": "lee"}, [1, 4]),
        ("filter[number] exact integer", {"filternumber": "2"}, [2]),
        ("filter[year_licensed] any of", {"filteryear_licensed": "2001,2010"}, [1, 4]),
        ("filter[license_state] any of an enum", {"filterlicense_state": "NY,TX"}, [1, 2]),
        ("filter[is_employee] boolean", {"filteris_employee": BooleanFilter.TRUE}, [1]),
        ("filter[is_employee] boolean 0", {"filteris_employee": BooleanFilter.FALSE_0}, [2]),
        ("filter[uuid] list", {"filteruuid": f"{bob.uuid},{str(jon.uuid).upper()}"}, [2, 4]),
        ("filter[vehicle] reference by number", {"filtervehicle": str(made["toyota"].data.number)}, [4]),
        ("filter[vehicle] reference by UUID", {"filtervehicle": str(made["ford"].uuid)}, [1]),
        ("filter[license_expiration] date range", {"filterlicense_expiration": "2027-01-01,"}, [1]),
        ("filter[created] timestamp range (a past year)", {"filtercreated": "2000-01-01,2000-12-31"}, []),
        ("filter[created] timestamp range (today)", {"filtercreated": f"{today},{today}"}, [1, 2, 3, 4]),
    ]
    for label, params, expected in cases:
        got = s.numbers(**params)
        changed = expected != everyone or label.endswith("(today)")
        check(f"listDrivers {label}", got == expected and changed, (got, expected))


def includes_sorts_cursors(s: Session) -> None:
    """Includes, descending sorts, and cursors followed both ways."""
    plain = s.drivers(filterfirst_name="ann").data[0]
    included = s.drivers(filterfirst_name="ann", include=[DriverInclude.ADDRESS]).data[0]
    check("listDrivers without include: relations.address is None", plain.relations.address is None)
    check(
        "listDrivers include=address: a typed Address",
        isinstance(included.relations.address, Address) and included.relations.address.data.city == "Austin",
    )
    more = [driver_item(first_name=f"Extra {n}") for n in range(12)]
    create_drivers.sync_detailed(s.risk, client=s.client, body=DriverCreate(data=more))
    descending = [d.data.number for d in s.drivers(sort=[ListDriversSortItem.NUMBER_DESC], per_page=100).data]
    check("listDrivers sort=-number (NUMBER_DESC)", descending == list(range(16, 0, -1)), descending)
    two_keys = s.drivers(sort=[ListDriversSortItem.LAST_NAME_DESC, ListDriversSortItem.NUMBER], per_page=10).data
    check("listDrivers sort=-last_name,number (two keys)", [d.data.last_name for d in two_keys[:3]] == ["Leeds", "Lee", "Jones"])
    first = s.drivers(per_page=10, sort=[ListDriversSortItem.NUMBER])
    check(
        "cursor: page 1 of 16 at 10 per page",
        [d.data.number for d in first.data] == list(range(1, 11)) and first.prev_cursor is None,
    )
    second = s.drivers(per_page=10, sort=[ListDriversSortItem.NUMBER], cursor=first.next_cursor)
    check(
        "cursor: next_cursor gives page 2, the last",
        [d.data.number for d in second.data] == list(range(11, 17)) and second.next_cursor is None,
    )
    back = s.drivers(per_page=10, sort=[ListDriversSortItem.NUMBER], cursor=second.prev_cursor)
    check("cursor: prev_cursor gives page 1 again", [d.data.number for d in back.data] == list(range(1, 11)))


def bulk_writes(s: Session, made: dict) -> None:
    """Bulk update and delete of mixed kinds, through PATCH, DELETE and POST with a method override."""
    ann, bob, hannah, jon = made["drivers"]
    address = s.drivers(filteruuid=str(ann.uuid), include=[DriverInclude.ADDRESS]).data[0].relations.address
    building = made["buildings"][0]
    update = BulkUpdate(
        data=[
            DriverUpdateItem(
                object_=DriverUpdateItemObject.DRIVER,
                uuid=bob.uuid,
                data=DriverUpdateData(first_name="Robert", license_state=None),
            ),
            AddressUpdateItem(
                object_=AddressUpdateItemObject.ADDRESS, uuid=address.uuid, data=AddressUpdateData(city="Round Rock")
            ),
            VehicleUpdateItem(
                object_=VehicleUpdateItemObject.VEHICLE, uuid=made["toyota"].uuid, data=VehicleUpdateData(model="Camry")
            ),
            PremiseUpdateItem(
                object_=PremiseUpdateItemObject.PREMISE, uuid=made["fresno"].uuid, data=PremiseUpdateData(zip_="93650")
            ),
            BuildingUpdateItem(object_=BuildingUpdateItemObject.BUILDING, uuid=building.uuid, data=BuildingUpdateData(number=40)),
        ]
    )
    response = update_risk_data.sync_detailed(s.risk, client=s.client, body=update)
    kinds = [o.object_.value for o in response.parsed.data] if isinstance(response.parsed, UpdatedObjectList) else []
    check("updateRiskData: five kinds in one request", kinds == ["driver", "address", "vehicle", "premise", "building"], kinds)
    robert = s.drivers(filteruuid=str(bob.uuid)).data[0]
    check("updateRiskData: null cleared license_state", robert.data.first_name == "Robert" and robert.data.license_state is None)

    dry = update_risk_data.sync_detailed(
        s.risk,
        client=s.client,
        precognition=PrecognitionFlag.TRUE,
        body=BulkUpdate(
            data=[
                DriverUpdateItem(object_=DriverUpdateItemObject.DRIVER, uuid=bob.uuid, data=DriverUpdateData(first_name="Nope"))
            ]
        ),
    )
    check(
        "updateRiskData dry-run: 204, Precognition-Success, nothing written",
        dry.status_code == 204
        and dry.headers.get("precognition-success") == "true"
        and s.drivers(filteruuid=str(bob.uuid)).data[0].data.first_name == "Robert",
    )

    override = override_risk_data.sync_detailed(
        s.risk,
        client=s.client,
        body=OverrideUpdate(
            field_method=OverrideUpdateMethod.PATCH,
            data=[
                DriverUpdateItem(object_=DriverUpdateItemObject.DRIVER, uuid=hannah.uuid, data=DriverUpdateData(percent_use=50))
            ],
        ),
    )
    check(
        "overrideRiskData (_method: PATCH): a typed UpdatedDriver, its data a DriverData",
        isinstance(override.parsed, ChangedObjectList)
        and isinstance(override.parsed.data[0], UpdatedDriver)
        and override.parsed.data[0].data.percent_use == 50,
    )

    delete = delete_risk_data.sync_detailed(
        s.risk,
        client=s.client,
        body=BulkDelete(
            data=[
                BulkDeleteItem(object_=ObjectKind.BUILDING, uuid=building.uuid),
                BulkDeleteItem(object_=ObjectKind.ADDRESS, uuid=address.uuid),
                BulkDeleteItem(object_=ObjectKind.VEHICLE, uuid=made["toyota"].uuid),
                BulkDeleteItem(object_=ObjectKind.DRIVER, uuid=bob.uuid),
            ]
        ),
    )
    kinds = [o.object_.value for o in delete.parsed.data] if isinstance(delete.parsed, DeletedObjectList) else []
    check("deleteRiskData: four kinds in one request", kinds == ["building", "address", "vehicle", "driver"], kinds)
    check("deleteRiskData: deleting the vehicle cleared Jon's", s.drivers(filteruuid=str(jon.uuid)).data[0].data.vehicle is None)

    override = override_risk_data.sync_detailed(
        s.risk,
        client=s.client,
        body=OverrideDelete(
            field_method=OverrideDeleteMethod.DELETE, data=[BulkDeleteItem(object_=ObjectKind.DRIVER, uuid=jon.uuid)]
        ),
    )
    check(
        "overrideRiskData (body _method: DELETE): typed DeletedObject",
        isinstance(override.parsed, ChangedObjectList) and isinstance(override.parsed.data[0], DeletedObject),
    )
    check("deleted drivers are gone", s.numbers(filteruuid=f"{bob.uuid},{jon.uuid}") == [])


def dry_runs(s: Session) -> None:
    """Precognition: a valid dry-run writes nothing; an invalid one limited by Validate-Only names only those fields."""
    before = len(s.drivers(per_page=100).data)
    ok = create_drivers.sync_detailed(
        s.risk, client=s.client, precognition=PrecognitionFlag.TRUE, body=DriverCreate(data=[driver_item(first_name="Dry")])
    )
    check(
        "createDrivers dry-run: 204 without a body or Content-Type, nothing created",
        ok.status_code == 204
        and ok.content == b""
        and "content-type" not in ok.headers
        and len(s.drivers(per_page=100).data) == before,
    )
    bad = create_drivers.sync_detailed(
        s.risk,
        client=s.client,
        precognition=PrecognitionFlag.TRUE,
        precognition_validate_only="data.*.data.percent_use",
        body=DriverCreate(data=[driver_item(percent_use=500, year_licensed=1800), driver_item(percent_use=101)]),
    )
    errors = bad.parsed.errors.additional_properties if isinstance(bad.parsed, ValidationError) else {}
    check(
        "createDrivers invalid dry-run limited by Precognition-Validate-Only: 422 on exactly those fields",
        bad.status_code == 422 and set(errors) == {"data.0.data.percent_use", "data.1.data.percent_use"},
        errors,
    )
    check(
        "422 in Laravel's words",
        errors.get("data.0.data.percent_use") == ["The data.0.data.percent_use field must be between 0 and 100."],
        errors,
    )


def safe_retries(s: Session) -> None:
    """Idempotency-Key: a retry with the key answers the first answer and writes nothing again; another body, 422."""
    before = len(s.drivers(per_page=100).data)
    key = str(uuid4())
    body = DriverCreate(data=[driver_item(first_name="Retried")])
    first = create_drivers.sync_detailed(s.risk, client=s.client, idempotency_key=key, body=body)
    again = create_drivers.sync_detailed(s.risk, client=s.client, idempotency_key=key, body=body)
    check(
        "createDrivers retried with its Idempotency-Key: the first 201 again, Idempotent-Replayed, one driver",
        first.status_code == again.status_code == 201
        and again.headers.get("idempotent-replayed") == "true"
        and isinstance(first.parsed, DriverList)
        and isinstance(again.parsed, DriverList)
        and [d.uuid for d in again.parsed.data] == [d.uuid for d in first.parsed.data]
        and len(s.drivers(per_page=100).data) == before + 1,
    )
    other = create_drivers.sync_detailed(
        s.risk, client=s.client, idempotency_key=key, body=DriverCreate(data=[driver_item(first_name="Other")])
    )
    errors = other.parsed.errors.additional_properties if isinstance(other.parsed, ValidationError) else {}
    check(
        "the key with another body: 422 naming Idempotency-Key", other.status_code == 422 and list(errors) == ["Idempotency-Key"]
    )


def webhooks_after(s: Session, hooks: dict) -> None:
    """Webhook list filters, update, rotate-secret, ping, deliveries, redeliver, events, delete."""
    crm, zap = hooks["crm"], hooks["zap"]
    check("listWebhooks unfiltered", s.webhooks() == {crm.uuid, zap.uuid})
    check("listWebhooks filter[type] (exact)", s.webhooks(filtertype="zapier") == {zap.uuid})
    check("listWebhooks filter[events] (any of)", s.webhooks(filterevents="form.completed,webhook.ping") == {crm.uuid})
    check("listWebhooks filter[search] (contains on url)", s.webhooks(filtersearch="hooks/zap") == {zap.uuid})

    update = WebhookUpdate(
        data=[
            WebhookUpdateDataItem(
                object_=WebhookUpdateDataItemObject.WEBHOOK,
                uuid=zap.uuid,
                data=WebhookUpdateData(disabled=True, description="paused"),
            )
        ]
    )
    updated = update_webhooks.sync_detailed(client=s.client, body=update).parsed
    check(
        "updateWebhooks: disabled has a timestamp", isinstance(updated, WebhookList) and updated.data[0].data.disabled is not None
    )
    check(
        "listWebhooks filter[is_disabled]=false: active only",
        s.webhooks(filteris_disabled=IsDisabledFilter.FALSE) == {crm.uuid},
    )

    dry = rotate_secret.sync_detailed(str(crm.uuid), client=s.client, precognition=PrecognitionFlag.TRUE)
    rotated = rotate_secret.sync_detailed(str(crm.uuid), client=s.client).parsed
    check(
        "rotateSecret: dry-run 204, then a new secret",
        dry.status_code == 204
        and isinstance(rotated, WebhookList)
        and rotated.data[0].meta.signing_secret != crm.meta.signing_secret,
    )

    ping = ping_webhook.sync_detailed(str(crm.uuid), client=s.client).parsed
    check("pingWebhook: 202, typed PingAccepted", isinstance(ping, PingAccepted) and ping.event == EventName.WEBHOOK_PING)
    refused = ping_webhook.sync_detailed(str(zap.uuid), client=s.client)
    check("pingWebhook on a disabled webhook: 409", refused.status_code == 409)

    body = PublishEvent(event=PublishEventEvent.FORM_COMPLETED, data=PublishEventData())
    body.data["form"] = "intake"
    accepted = publish_event.sync_detailed(client=s.client, body=body).parsed
    check(
        "publishEvent: 202, typed EventAccepted",
        isinstance(accepted, EventAccepted) and accepted.event == EventName.FORM_COMPLETED,
    )

    log = s.deliveries(crm.uuid, per_page=100)
    events = sorted(d.data.event.value for d in log.data)
    check(
        "listDeliveries: the CRM webhook got 16 driver.created, the ping, the form", events.count("driver.created") == 16, events
    )
    check("listDeliveries: newest first by default", log.data[0].data.event == EventName.FORM_COMPLETED, events)
    pings = s.deliveries(crm.uuid, filterevent="webhook.ping").data
    check("listDeliveries filter[event]", [d.uuid for d in pings] == [ping.delivery])
    check("listDeliveries filter[status]=failed (none yet)", s.deliveries(crm.uuid, filterstatus="failed").data == [])
    oldest = s.deliveries(crm.uuid, sort=[ListDeliveriesSortItem.CREATED], per_page=10).data[0]
    check("listDeliveries sort=created: oldest first", oldest.data.event == EventName.DRIVER_CREATED)
    one = get_delivery.sync_detailed(str(crm.uuid), str(ping.delivery), client=s.client).parsed
    shown = one.data if isinstance(one, DeliveryItem) else None
    check("getDelivery: typed DeliveryItem, its body", shown is not None and '"webhook.ping"' in shown.data.body, one)
    found = list_events.sync_detailed(client=s.client, filterevent="webhook.ping").parsed
    made = [d.delivery for e in found.data for d in e.data.deliveries] if isinstance(found, EventPage) else found
    check("listEvents filter[event]: typed EventPage, the ping's delivery", made == [ping.delivery], made)
    event = get_event.sync_detailed(str(ping.id), client=s.client).parsed
    check("getEvent: typed EventItem, no risk profile", isinstance(event, EventItem) and event.data.data.risk is None, event)
    again = redeliver.sync_detailed(str(crm.uuid), str(ping.delivery), client=s.client).parsed
    check("redeliver: 202, the same delivery pending again", isinstance(again, DeliveryItem) and again.data.uuid == ping.delivery)

    recovered = recover_deliveries.sync_detailed(
        str(crm.uuid), client=s.client, body=WebhookRecover(since=datetime.datetime(2000, 1, 1, tzinfo=datetime.UTC))
    ).parsed
    check(
        "recoverDeliveries: 202, typed RecoveryItem, nothing failed to recover",
        isinstance(recovered, RecoveryItem) and recovered.data.deliveries == 0 and recovered.data.webhook == crm.uuid,
    )
    types = list_event_types.sync_detailed(client=s.client, filtername="driver.created,webhook.ping").parsed
    check(
        "listEventTypes filter[name]: typed EventTypeList with payload schemas",
        isinstance(types, EventTypeList)
        and [t.name for t in types.data] == [EventName.DRIVER_CREATED, EventName.WEBHOOK_PING]
        and all(t.description and t.schema for t in types.data),
    )

    deleted = delete_webhooks.sync_detailed(
        client=s.client,
        body=WebhookDelete(data=[WebhookDeleteDataItem(object_=WebhookDeleteDataItemObject.WEBHOOK, uuid=zap.uuid)]),
    ).parsed
    check(
        "deleteWebhooks: typed DeletedWebhookList", isinstance(deleted, DeletedWebhookList) and deleted.data[0].uuid == zap.uuid
    )
    check("listWebhooks after delete", s.webhooks() == {crm.uuid})


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--risk", required=True)
    args = parser.parse_args(argv)
    s = Session(args.base_url, args.token, args.risk)
    hooks = webhooks_first(s)
    made = risk_data(s)
    filters(s, made)
    includes_sorts_cursors(s)
    dry_runs(s)
    bulk_writes(s, made)
    webhooks_after(s, hooks)
    safe_retries(s)
    print(f"use_sdk: {RESULTS['passed']} passed, {RESULTS['failed']} failed")
    return 1 if RESULTS["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
