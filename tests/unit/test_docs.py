"""The documentation's reference covers the code (issue 42): every verb and flag, every spec key, every error
code and every metric has its text, so a new one without docs fails here; and every page example comes from
a file a test runs."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def reference() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_reference", ROOT / "tools" / "docs_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_verb_and_flag_is_on_the_cli_page_with_its_help() -> None:
    ref = reference()
    page = ref.cli_page()
    verbs = list(ref.cli_commands())
    assert {"deltaflow run", "deltaflow init", "deltaflow schema", "deltaflow kafka start"} <= {
        p for p, _ in verbs}
    for path, command in verbs:
        assert command.help, f"{path} has no help"
        assert f"## `{path}`" in page
        for param in command.params:
            if param.name != "help" and not getattr(param, "hidden", False):
                assert param.help, f"{path}: {param.opts or param.name} has no help"


def test_every_spec_key_has_a_description_and_is_on_the_spec_page() -> None:
    ref = reference()
    page = ref.spec_page()
    keys = [key for key, _, _ in ref.spec_keys()]
    assert {"name", "kafka.options", "trigger.flows.<name>.interval", "maintenance.zorder",
            "lease.ttl"} <= set(keys)
    for key, field, _ in ref.spec_keys():
        assert field.description, f"deltaflow.yml key '{key}' has no description"
        assert f"| `{key}` |" in page
    for python in ("Literal[", "None", "{'", "['", "| str", "dict["):  # types, defaults and examples in YAML
        assert python not in page.split("| key |")[1], f"the spec page shows Python: {python!r}"
    assert "| `libraries` | list of text | `[transformations/**]` |" in page


def test_every_error_code_has_its_meaning_and_usual_fix() -> None:
    ref = reference()
    page = ref.errors_page()
    codes = {cls.code for cls in ref.error_classes()} - {"DF"}
    assert {"DF-CONFIG", "DF-GRAPH", "DF-FLOW", "DF-STORAGE", "DF-LEASE"} <= codes
    for cls in ref.error_classes():
        if cls.code != "DF":
            assert cls.__doc__ and cls.fix and cls.example, f"{cls.code} has no meaning, example or fix"
            assert f"| `{cls.code}` |" in page and f"`` error: {cls.code} {cls.example} ``" in page


def test_every_metric_is_on_the_metrics_page() -> None:
    ref = reference()
    page = ref.metrics_page()
    families = ref.metric_families()
    assert len(families) >= 15
    for family in families:
        assert family.documentation and f"`{family.name}" in page


def test_the_api_page_lists_every_public_name_of_deltaflow() -> None:
    import deltaflow

    page = reference().api_page()
    for name in deltaflow.__all__:
        if name[0].islower() and not name.startswith("_"):
            assert f"::: deltaflow.{name}" in page, name


def test_every_file_a_page_includes_exists_and_the_tutorial_shows_only_files_its_test_runs() -> None:
    included = {}
    for page in (ROOT / "docs").rglob("*.md"):
        for path in re.findall(r'^--8<-- "([^"]+)"', page.read_text(), re.MULTILINE):
            assert (ROOT / path).is_file(), f"{page.name} includes {path}, which does not exist"
            included.setdefault(page.name, []).append(path)
    # the tutorial's test runs the page's own commands: a file it shows is one 'deltaflow init' writes, or
    # is written by a command of the page
    tutorial = (ROOT / "docs" / "tutorial.md").read_text()
    commands = "".join(re.findall(r"^```bash\n(.*?)^```", tutorial, re.MULTILINE | re.DOTALL))
    for path in included["tutorial.md"]:
        written = path.startswith(("src/deltaflow/templates/starter/", "examples/shop_kafka/"))
        assert written or f'--8<-- "{path}"' in commands, f"the tutorial shows {path}; no command writes it"


def test_the_readmes_pipeline_is_the_starter_deltaflow_init_writes() -> None:
    readme = (ROOT / "README.md").read_text()
    starter = ROOT / "src" / "deltaflow" / "templates" / "starter"
    spec = (starter / "deltaflow.yml").read_text()
    assert f"```yaml\n{spec}```" in readme
    assert f"```python\n{(starter / 'transformations' / 'pipeline.py').read_text()}```" in readme
    assert len(readme.splitlines()) <= 200
