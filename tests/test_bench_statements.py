"""bench.statements' command line and tables, on made-up rows (the soak it runs is a benchmark, not a test)."""

from bench import statements


def test_what_follows_the_double_dash_goes_to_the_soak():
    args = statements.options(["--seconds", "5", "--top", "3", "--", "--agencies", "2"])
    assert (args.seconds, args.top, args.soak) == (5.0, 3, ["--agencies", "2"])
    assert statements.options([]).soak == []


def test_statements_show_on_one_line_cut_to_the_width():
    rows = [(652, 10783.41, 16.5392, 'SELECT "t1"."id"\n   FROM "risk" AS "t1"  WHERE ("t1"."id" = $1) FOR UPDATE')]
    header, line = statements.table(rows, 40)
    assert header.split() == ["calls", "total", "ms", "mean", "ms", "statement"]
    assert line.split()[:3] == ["652", "10783.4", "16.539"]
    assert line.endswith('SELECT "t1"."id" FROM "risk" AS "t1" WH…')
    assert len(line.split("16.539  ", 1)[1]) == 40


def test_a_prepared_statement_shows_as_prepared_whichever_name_it_had():
    rows = [(908, 9896.3, 10.899, 'PREPARE riskapi_2 AS SELECT "t1"."id" FROM "risk" AS "t1" WHERE ("t1"."id" = $1) FOR UPDATE')]
    _, line = statements.table(rows, 160)
    assert line.endswith('  [prepared] SELECT "t1"."id" FROM "risk" AS "t1" WHERE ("t1"."id" = $1) FOR UPDATE')
