"""Issue 23 #5: the held-out learning curve's slice and picture (the callback itself runs in the
shortened demo, tests/rl/test_demo.py)."""

from __future__ import annotations

from rl.curve import SINGLE, CurvePoint, curve_family, curve_slice, plot_learning_curve
from synth.tasks import Action, Rubric, Task, UserScenario

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _task(i: int, tool: str, needs: bool = False) -> Task:
    args = {"scene_id": "SC-1"}
    return Task(id=f"t{i:02d}", domain="home_devices", seed=0, instruction="Apply a scene.", persona="p",
                user_scenario=UserScenario(persona="p", reason_for_call="r", task_instructions="i",
                                           known_info={"scene id": "SC-1"} if needs else {}),
                gold_actions=[Action(name=tool, arguments=args)], rubric=Rubric(), tools=[tool], difficulty="easy",
                needs_user_info=needs)


def test_the_slice_is_fixed_and_takes_each_multistep_family_and_the_single_actions_alike():
    tasks = [_task(i, "activate_home_scene", needs=i % 2 == 0) for i in range(10)]
    tasks += [_task(10 + i, "delete_home_scene") for i in range(5)]
    sl = curve_slice(list(reversed(tasks)), 3)
    assert [t.id for t in sl] == ["t00", "t02", "t04", "t01", "t03", "t05"]  # by id, 3 per curve family
    assert [curve_family(t) for t in sl] == ["ask_user"] * 3 + [SINGLE] * 3
    assert curve_slice(tasks, 3) == sl


def test_learning_curve_png_has_both_panels(tmp_path):
    points = [CurvePoint(step=s, success=0.4 + 0.01 * s, multistep_success=0.2 + 0.02 * s,
                         families={"ask_user": 0.1 + 0.02 * s, SINGLE: 0.6}, seconds=1.0) for s in (0, 10, 20)]
    history = [{"reward": 0.1 * s, "step": s} for s in range(1, 21)]
    out = plot_learning_curve(points, history, tmp_path / "lc.png")
    assert out == tmp_path / "lc.png" and out.read_bytes()[:8] == PNG_MAGIC
    from PIL import Image

    with Image.open(out) as im:
        w, h = im.size
    assert w > 1.5 * h  # two panels side by side
    assert plot_learning_curve([], history, tmp_path / "none.png") is None and not (tmp_path / "none.png").exists()
