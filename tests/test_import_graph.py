"""tools.import_graph's folder-size rule, on made-up trees: it covers bench/, toolkit/ and tools/, not tests/."""

import io
from pathlib import Path

from tools import import_graph


def tree(root: Path, folder: str, count: int) -> None:
    (root / folder).mkdir(parents=True, exist_ok=True)
    for n in range(count):
        (root / folder / f"m{n}.py").write_text('"""A module."""\n')


def broken(root: Path) -> list[str]:
    return import_graph.check(import_graph.build(root, {"pkg": "pkg"}), out=io.StringIO())


def test_a_crowded_folder_outside_the_graphs_breaks_the_rule(tmp_path):
    tree(tmp_path, "pkg", 2)
    tree(tmp_path, "bench", import_graph.MAX_FOLDER_MODULES + 1)
    tree(tmp_path, "toolkit", import_graph.MAX_FOLDER_MODULES)
    assert broken(tmp_path) == [f"more than {import_graph.MAX_FOLDER_MODULES} modules in bench/"]


def test_subpackages_and_tests_are_counted_apart(tmp_path):
    tree(tmp_path, "pkg", 2)
    tree(tmp_path, "tools", import_graph.MAX_FOLDER_MODULES)
    tree(tmp_path, "tools/sub", import_graph.MAX_FOLDER_MODULES)
    tree(tmp_path, "tests", import_graph.MAX_FOLDER_MODULES + 10)  # one file per feature: pytest's convention
    assert broken(tmp_path) == []
    out = io.StringIO()
    import_graph.check(import_graph.build(tmp_path, {"pkg": "pkg"}), out=out)
    assert f"widest folder outside the graphs: tools/ ({import_graph.MAX_FOLDER_MODULES} modules)" in out.getvalue()
