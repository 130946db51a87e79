"""Packaging: the wheel installs one top-level name, riskapi, with the layers and the spec under it."""

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_wheel_holds_riskapi_alone_with_its_layers_and_spec(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
    )
    [wheel] = tmp_path.glob("riskapi-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert {top for top in tops if not top.endswith(".dist-info")} == {"riskapi"}, tops
    for module in ("handlers/risk_data.py", "models/webhooks.py", "models/migrations/__init__.py", "jobs/delivery.py"):
        assert f"riskapi/{module}" in names, module
    assert "riskapi/openapi/openapi.yaml" in names
