"""The spec as written and the rendered docs, served without a token and without a CDN."""

import re

import yaml


def test_spec_is_served_as_written(client):
    served = client.get("/openapi.json")
    assert served.status_code == 200 and served.headers["content-type"] == "application/json"
    document = served.json()
    with open("spec/openapi.yaml", encoding="utf-8") as handle:
        written = yaml.safe_load(handle)
    assert document["components"]["schemas"].keys() == written["components"]["schemas"].keys()
    assert '"$ref": "#/components/' in served.text.replace('":"', '": "')
    assert "x-bearerInfoFunc" not in served.text and "api.auth" not in served.text
    as_yaml = client.get("/openapi.yaml")
    assert as_yaml.status_code == 200 and yaml.safe_load(as_yaml.text) == document


def test_docs_render_from_local_assets(client):
    page = client.get("/docs/")
    assert page.status_code == 200 and "swagger-ui" in page.text
    assert "openapi.json" in page.text
    sources = re.findall(r'(?:src|href)="([^"]+)"', page.text)
    assert sources and not [s for s in sources if s.startswith(("http://", "https://", "//"))]
    for source in sources:
        if source.endswith(".js"):
            asset = client.get("/docs/" + source.split("/")[-1])
            assert asset.status_code == 200 and len(asset.content) > 1000


def test_summaries_are_plain_words():
    # Swagger UI shows a summary as plain text: code (backticks) belongs in descriptions, which render Markdown.
    with open("spec/openapi.yaml", encoding="utf-8") as handle:
        text = handle.read()
    summaries = re.findall(r"^\s*summary:\s*(.*)$", text, flags=re.MULTILINE)
    assert len(summaries) > 24
    assert [s for s in summaries if "`" in s or "<" in s] == []


def test_the_docs_page_links_the_changelog_served_beside_the_spec(client):
    served = client.get("/changelog.md")
    assert served.status_code == 200 and served.headers["content-type"].startswith("text/markdown")
    with open("spec/CHANGELOG.md", encoding="utf-8") as handle:
        assert served.text == handle.read()
    description = client.get("/openapi.json").json()["info"]["description"]
    assert "[the changelog](/api/v1/changelog.md)" in description
