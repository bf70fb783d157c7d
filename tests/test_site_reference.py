"""docs/site-file.md documents every field of the site model: its reference part is generated from the model's
field descriptions (terravixens.config.reference), and these tests fail when a field has none or the file is stale."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from terravixens.config import model, standalone, storage
from terravixens.config.reference import render, sections, undocumented, updated

DOC = Path(__file__).resolve().parent.parent / "docs" / "site-file.md"
REGENERATE = "run: pipenv run python -m terravixens.config.reference --write docs/site-file.md"


def test_every_field_of_the_site_has_a_description():
    assert undocumented() == [], "describe these fields in terravixens/config/model.py (Field(description=…))"


def test_docs_site_file_is_generated_from_the_current_model():
    text = DOC.read_text()
    assert text == updated(text), REGENERATE


def test_fields_named_in_the_issue_are_documented():
    reference = render()
    for row in (
        "| `privileges` | list of text |",
        "| `role_id` | text | `TerravixensProvisioner` |",
        "| `token_name` | text | `terravixens` |",
        "| `comment` | text | `managed by terravixens` |",
        "| `allow_insecure_http` | text | none |",
    ):
        assert row in reference


def test_every_model_is_reached_once_with_all_its_paths():
    found = dict(sections())
    assert found[model.Node] == ["clusters.<name>.control_planes.<name>", "clusters.<name>.workers.<name>"]
    assert found[model.VlanInterface] == ["clusters.<name>.control_planes.<name>.networks.vlans.<id>"]
    assert set(found) == {
        cls
        for module in (model, standalone, storage)
        for cls in vars(module).values()
        if isinstance(cls, type) and issubclass(cls, model.Strict) and cls is not model.Strict
    }


class _WithNewSection(model.Site):
    """A site with one more section, as a later change would add."""

    extra: model.Datastores | None = Field(None)


def test_a_new_undocumented_field_is_caught():
    assert undocumented(_WithNewSection) == ["_WithNewSection.extra"]


def test_a_new_documented_section_appears_in_the_reference():
    class Observatory(model.Strict):
        note: str = Field("x", description="A note.")

    class Documented(model.Site):
        observatory: Observatory | None = Field(None, description="A new section.")

    reference = render(Documented)
    assert "| `observatory` | [observatory](#observatory) | none | A new section. |" in reference
    assert '### <a id="observatory"></a>`observatory`' in reference and "| `note` | text | `x` | A note. |" in reference
    assert "observatory" not in render()
