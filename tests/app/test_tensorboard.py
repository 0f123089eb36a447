"""TensorBoard: per-pod PPO diagnostics, tournament events as text, each pod's hyper-parameters."""

from __future__ import annotations

from pathlib import Path

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tiny import tiny_bars, tiny_spec, write_tiny_dataset

import finpod
from finpod.pipeline.progress import POD_METRICS


def _accumulator(folder: Path) -> EventAccumulator:
    events = EventAccumulator(str(folder), size_guidance={"scalars": 0, "tensors": 0})
    events.Reload()
    return events


def test_run_logs_ppo_diagnostics_events_and_hparams_per_pod(tmp_path: Path) -> None:
    dataset = write_tiny_dataset(tmp_path / "data", tiny_bars(seed=2))
    spec = tiny_spec(dataset, budget_env_steps=768).with_(tournament={"pool_size": 2})
    result = finpod.run(spec, out=tmp_path / "reports", quiet=True, report=False)
    board = result.run_dir / "tensorboard"
    main = _accumulator(board)
    scalars = set(main.Tags()["scalars"])
    assert {"tournament/best_validation_score", "pods/validation_score"} <= scalars
    pods = sorted({tag.split("/")[0] for tag in scalars if tag.startswith("pod_")})
    assert len(pods) >= 2
    for pod in pods:
        for name in (*POD_METRICS, "validation_score"):
            assert f"{pod}/{name}" in scalars, f"{pod}/{name}"
            values = [event.value for event in main.Scalars(f"{pod}/{name}")]
            assert values, f"{pod}/{name}"
    learning_rates = [event.value for event in main.Scalars(f"{pods[0]}/learning_rate")]
    assert all(rate > 0 for rate in learning_rates)
    texts = main.Tags()["tensors"]
    assert any(tag.startswith("tournament/events") for tag in texts)
    hparam_runs = sorted(path.name for path in (board / "hparams").iterdir())
    assert hparam_runs[:2] == ["pod_000", "pod_001"]
    plugin = _accumulator(board / "hparams" / "pod_000")
    content = plugin.PluginTagToContent("hparams")
    assert b"learning_rate" in content["_hparams_/session_start_info"]
    assert plugin.Scalars("hparam/best_validation_score")
