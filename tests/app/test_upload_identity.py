"""An uploaded config.json gets its identity from the model-id field next to the upload."""

from __future__ import annotations

from planner.model.bundled import bundled_models
from tests.app.conftest import no_errors, page, widget


def _upload(at, model_id: str | None) -> None:  # type: ignore[no-untyped-def]
    widget(at.radio, "plan_model_src").set_value("Upload config.json").run()
    text = bundled_models()["qwen3-8b"].path.read_bytes()
    widget(at.file_uploader, "plan_model_file").set_value(
        ("config.json", text, "application/json")
    ).run()
    if model_id is not None:
        widget(at.text_input, "plan_model_id").set_value(model_id)
    at.button(key="plan_button").click().run()


def test_model_id_is_the_identity_of_the_upload() -> None:
    at = page("plan")
    _upload(at, "Qwen/Qwen3-8B")
    no_errors(at)
    dep = at.session_state["plan_result"][0]["best"]["deployment"]
    assert dep["hf_id"] == "Qwen/Qwen3-8B"
    assert not any("need the model id" in i.value for i in at.info)


def test_without_model_id_no_engine_configs_are_offered() -> None:
    at = page("plan")
    _upload(at, None)
    no_errors(at)
    assert at.session_state["plan_result"][0]["best"]["deployment"]["hf_id"] == ""
    assert any("need the model id" in i.value for i in at.info)


def test_a_bad_model_id_is_one_line() -> None:
    at = page("plan")
    _upload(at, "x\n$(reboot)")
    assert any("model id" in e.value for e in at.error)
