"""bench.framework_costs' parts on the test app: each runs what its framework runs per request (figures are the bench's)."""

from bench import framework_costs


def test_each_part_runs_as_its_framework_runs_it_per_request(server, tenant):
    path = f"/api/v1/risks/{tenant.risk}/data/drivers"
    # Connexion's validation of a create, captured on the real app; what it derives per request is derived again.
    validation, scope = framework_costs.captured_operation(server.url, tenant, path)
    made = framework_costs.connexion_derivations(validation, scope)()
    assert type(made).__name__ == "BodyValidator" and made.schema == validation._operation.body_schema("application/json")
    assert isinstance(framework_costs.per_call(framework_costs.connexion_derivations(validation, scope), 10), float)
    # Flask's second routing finds the operation Connexion routed to.
    rule, arguments = framework_costs.flask_routing(server.server.config.app.app, path)()
    assert rule.methods >= {"POST"} and arguments == {"risk": tenant.risk}
    # Measured, never asserted on (a benchmark's figure, not a test's): the writes go through.
    assert all(isinstance(cost, float) for cost in framework_costs.socket_writes(b"HTTP/1.1 201 Created\r\n\r\n", b"{}", 10))
