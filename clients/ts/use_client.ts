// Drive every operation of the served app with the client generated from spec/openapi.yaml
// (openapi-typescript types + openapi-fetch), compiled by `tsc --strict`. Run by run.mjs:
//   node build/use_client.js BASE TOKEN RISK OTHER_RISK
// Prints one line per check and "use_client: N passed, M failed"; exits 1 when a check fails.
import createClient from "openapi-fetch";

import type { components, paths } from "./generated/schema.js";

type Schemas = components["schemas"];

declare const process: { argv: string[]; exitCode?: number };

const [base, token, risk, otherRisk] = process.argv.slice(2) as [string, string, string, string];
const api = createClient<paths>({ baseUrl: base, headers: { Authorization: `Bearer ${token}` } });
const tally = { passed: 0, failed: 0 };

function check(label: string, condition: boolean, detail: unknown = ""): void {
  tally[condition ? "passed" : "failed"] += 1;
  console.log(`${condition ? "ok  " : "FAIL"} ${label}${condition ? "" : `: ${JSON.stringify(detail)}`}`);
}

/** A write's `data` is undefined on its 204 dry-run answer: outside a dry-run it must be there. */
function must<T>(data: T | undefined, label: string): T {
  if (data === undefined) {
    throw new Error(`${label}: no body`);
  }
  return data;
}

const path = { path: { risk } };

async function probes(): Promise<void> {
  const health = await api.GET("/healthz");
  check("healthz: 200 ok", health.response.status === 200 && health.data?.status === "ok", health.data);
  const ready = await api.GET("/readyz");
  check("readyz: 200, the database answers", ready.response.status === 200 && ready.data?.checks.database === "ok", ready.data);
}

async function riskData(): Promise<{ driver: string; vehicle: string; premise: string; building: string }> {
  const vehicles = await api.POST("/risks/{risk}/data/vehicles", {
    params: path,
    body: { data: [{ object: "vehicle", data: { year: 2022, make: "Ford", model: "Transit", vin: "1FTBW2CM5NKA12345" } }] },
  });
  const vehicle: Schemas["Vehicle"] = must(vehicles.data, "createVehicles").data[0]!;
  check("createVehicles: 201, a typed vehicle", vehicles.response.status === 201 && vehicle.data.year === 2022, vehicles.error);
  const premises = await api.POST("/risks/{risk}/data/premises", {
    params: path,
    body: { data: [{ object: "premise", data: { address: "9 Dock Rd", city: "Austin", state: "TX", zip: "78702" } }] },
  });
  const premise = must(premises.data, "createPremises").data[0]!;
  check("createPremises: 201", premises.response.status === 201 && premise.data.city === "Austin", premises.error);
  const buildings = await api.POST("/risks/{risk}/data/buildings", {
    params: { path: { risk }, query: { include: ["premise"] } },
    body: { data: [{ object: "building", data: { premise: premise.uuid } }] },
  });
  const building = must(buildings.data, "createBuildings").data[0]!;
  check("createBuildings: 201, its premise", buildings.response.status === 201 && building.data.premise === premise.uuid, buildings.error);
  const drivers = await api.POST("/risks/{risk}/data/drivers", {
    params: { path: { risk }, query: { include: ["address"] } },
    body: {
      data: [
        {
          object: "driver",
          data: {
            first_name: "Ann",
            last_name: "Lee",
            middle_name: null, // a nullable reference: `Text | null`
            license_state: "TX",
            vehicle: vehicle.uuid,
            address: { data: { address: "1 Main St", city: "Austin", state: "TX", zip: "78701" } },
          },
        },
      ],
    },
  });
  const driver = must(drivers.data, "createDrivers").data[0]!;
  const address: Schemas["Address"] | null = driver.relations.address;
  check("createDrivers: 201, null kept, the address included", driver.data.middle_name === null && address?.data.city === "Austin", drivers.error);
  return { driver: driver.uuid, vehicle: vehicle.uuid, premise: premise.uuid, building: building.uuid };
}

async function lists(made: { driver: string }): Promise<void> {
  const drivers = await api.GET("/risks/{risk}/data/drivers", {
    params: { path: { risk }, query: { "filter[search]": "lee", "filter[license_state]": "TX,CA", sort: ["-last_name", "number"], include: ["address"], per_page: 10 } },
  });
  const page = drivers.data;
  check("listDrivers: filter, sort, include", page?.data.length === 1 && page.data[0]?.uuid === made.driver && page.next_cursor === null, drivers.error);
  const vehicles = await api.GET("/risks/{risk}/data/vehicles", { params: { path: { risk }, query: { sort: ["-year"] } } });
  check("listVehicles: 200", vehicles.data?.data.length === 1, vehicles.error);
  const premises = await api.GET("/risks/{risk}/data/premises", { params: { path: { risk }, query: { "filter[city]": "aus" } } });
  check("listPremises: filter", premises.data?.data.length === 1, premises.error);
  const buildings = await api.GET("/risks/{risk}/data/buildings", { params: { path: { risk }, query: { include: ["premise"] } } });
  check("listBuildings: include", buildings.data?.data[0]?.relations.premise !== undefined, buildings.error);
  const missing = await api.GET("/risks/{risk}/data/drivers", { params: { path: { risk: otherRisk } } });
  const error: Schemas["Error"] | Schemas["ValidationError"] | undefined = missing.error;
  check("listDrivers: another agency's risk profile is 404, a typed Error", missing.response.status === 404 && error?.status === 404, error);
}

async function writes(made: { driver: string; vehicle: string; building: string }): Promise<void> {
  const dry = await api.POST("/risks/{risk}/data/drivers", {
    params: { path: { risk }, header: { Precognition: "true" } },
    body: { data: [{ object: "driver", data: { first_name: "Dry" } }] },
  });
  check("createDrivers dry-run: 204, no body", dry.response.status === 204 && dry.data === undefined, dry.error);
  const invalid = await api.POST("/risks/{risk}/data/drivers", {
    params: path,
    body: { data: [{ object: "driver", data: { number: 0 } }] },
  });
  const refused = invalid.error;
  check(
    "createDrivers: 422, a typed ValidationError",
    invalid.response.status === 422 && refused !== undefined && "errors" in refused && refused.errors["data.0.data.number"] !== undefined,
    refused,
  );
  const update = await api.PATCH("/risks/{risk}/data", {
    params: path,
    body: { data: [{ object: "driver", uuid: made.driver, data: { percent_use: 60, middle_name: null } }] },
  });
  check("updateRiskData: 200", update.response.status === 200 && must(update.data, "updateRiskData").data.length === 1, update.error);
  const override = await api.POST("/risks/{risk}/data", {
    params: path,
    body: { _method: "PATCH", data: [{ object: "vehicle", uuid: made.vehicle, data: { model: "F-250" } }] },
  });
  check("overrideRiskData (PATCH): 200", override.response.status === 200, override.error);
  const remove = await api.DELETE("/risks/{risk}/data", {
    params: path,
    body: { data: [{ object: "building", uuid: made.building }] },
  });
  check("deleteRiskData: 200", remove.response.status === 200 && must(remove.data, "deleteRiskData").data[0]?.uuid === made.building, remove.error);
}

async function webhooks(): Promise<void> {
  const created = await api.POST("/webhooks", {
    body: { data: [{ object: "webhook", data: { type: "custom", url: "https://hooks.example.com/in", events: ["driver.created", "form.completed"] } }] },
  });
  const hook = must(created.data, "createWebhooks").data[0]!;
  check("createWebhooks: 201, a signing secret", created.response.status === 201 && hook.meta.signing_secret.startsWith("whsec_"), created.error);
  const listed = await api.GET("/webhooks", { params: { query: { "filter[is_disabled]": "false", sort: ["-created"] } } });
  check("listWebhooks: filter", listed.data?.data.some((w) => w.uuid === hook.uuid) === true, listed.error);
  const updated = await api.PATCH("/webhooks", {
    body: { data: [{ object: "webhook", uuid: hook.uuid, data: { description: "CRM" } }] },
  });
  check("updateWebhooks: 200", must(updated.data, "updateWebhooks").data[0]?.data.description === "CRM", updated.error);
  const webhook = { path: { webhook: hook.uuid } };
  const rotated = await api.POST("/webhooks/{webhook}/rotate-secret", { params: webhook });
  check("rotateSecret: a new secret", must(rotated.data, "rotateSecret").data[0]?.meta.signing_secret !== hook.meta.signing_secret, rotated.error);
  const ping = await api.POST("/webhooks/{webhook}/ping", { params: webhook });
  const delivery = must(ping.data, "pingWebhook").delivery;
  check("pingWebhook: 202, its delivery", ping.response.status === 202 && delivery.length === 36, ping.error);
  const deliveries = await api.GET("/webhooks/{webhook}/deliveries", { params: { path: { webhook: hook.uuid }, query: { "filter[status]": "pending" } } });
  check("listDeliveries: the ping's delivery", deliveries.data?.data[0]?.uuid === delivery, deliveries.error);
  const one = await api.GET("/webhooks/{webhook}/deliveries/{delivery}", { params: { path: { webhook: hook.uuid, delivery } } });
  const shown: Schemas["Delivery"] | undefined = one.data?.data;
  check("getDelivery: the ping's, its body", shown?.uuid === delivery && shown.data.status === "pending" && shown.data.body.includes("webhook.ping"), one.error);
  const events = await api.GET("/events", { params: { query: { "filter[event]": "webhook.ping" } } });
  const event: Schemas["Event"] | undefined = events.data?.data[0];
  check("listEvents: the ping", event?.data.event === "webhook.ping" && event.data.deliveries[0]?.delivery === delivery, events.error);
  const fetched = await api.GET("/events/{event}", { params: { path: { event: event?.uuid ?? "" } } });
  check("getEvent: the ping, no risk profile", fetched.data?.data.uuid === event?.uuid && fetched.data?.data.data.risk === null, fetched.error);
  const again = await api.POST("/webhooks/{webhook}/deliveries/{delivery}/redeliver", { params: { path: { webhook: hook.uuid, delivery } } });
  check("redeliver: 202", again.response.status === 202 && must(again.data, "redeliver").data.uuid === delivery, again.error);
  const recovered = await api.POST("/webhooks/{webhook}/recover", { params: webhook, body: { since: "2026-01-01T00:00:00Z" } });
  check("recoverDeliveries: 202", recovered.response.status === 202, recovered.error);
  const types = await api.GET("/event-types", { params: { query: { "filter[name]": "driver.created,webhook.ping" } } });
  check("listEventTypes: two", types.data?.data.length === 2, types.error);
  const published = await api.POST("/events", { body: { event: "form.completed", data: { form: "F-1", risk } } });
  check("publishEvent: 202", published.response.status === 202 && must(published.data, "publishEvent").event === "form.completed", published.error);
  const deleted = await api.DELETE("/webhooks", { body: { data: [{ object: "webhook", uuid: hook.uuid }] } });
  check("deleteWebhooks: 200", deleted.response.status === 200, deleted.error);
}

async function safeRetries(): Promise<void> {
  // Idempotency-Key: the retry answers the first answer (Idempotent-Replayed), another body 422 naming the key.
  const header = { "Idempotency-Key": `ts-retry-${Date.now()}` };
  const body = { data: [{ object: "driver" as const, data: { first_name: "Retried" } }] };
  const first = await api.POST("/risks/{risk}/data/drivers", { params: { path: { risk }, header }, body });
  const again = await api.POST("/risks/{risk}/data/drivers", { params: { path: { risk }, header }, body });
  check(
    "createDrivers retried with its Idempotency-Key: the first 201 again, Idempotent-Replayed",
    first.response.status === 201 &&
      again.response.status === 201 &&
      again.response.headers.get("Idempotent-Replayed") === "true" &&
      must(again.data, "createDrivers").data[0]?.uuid === must(first.data, "createDrivers").data[0]?.uuid,
    again.error,
  );
  const other = await api.POST("/risks/{risk}/data/drivers", {
    params: { path: { risk }, header },
    body: { data: [{ object: "driver", data: { first_name: "Other" } }] },
  });
  const refused = other.error;
  check(
    "the key with another body: 422 naming Idempotency-Key",
    other.response.status === 422 && refused !== undefined && "errors" in refused && refused.errors["Idempotency-Key"] !== undefined,
    refused,
  );
}

async function main(): Promise<void> {
  await probes();
  const made = await riskData();
  await lists(made);
  await writes(made);
  await webhooks();
  await safeRetries();
}

main()
  .catch((error: unknown) => check("the scenario ran to its end", false, String(error)))
  .finally(() => {
    console.log(`use_client: ${tally.passed} passed, ${tally.failed} failed`);
    process.exitCode = tally.failed === 0 ? 0 : 1;
  });
