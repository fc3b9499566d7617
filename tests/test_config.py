import pytest
from trl import GRPOConfig

from v05_trl import V05GRPOConfig


def make(tmp_path, **kwargs):
    return V05GRPOConfig(output_dir=str(tmp_path), report_to=[], use_cpu=True, per_device_train_batch_size=8, **kwargs)


def test_defaults_follow_the_paper_and_keep_trl_in_step(tmp_path):
    config = make(tmp_path)
    assert (config.num_generations, config.max_num_generations) == (4, 16)
    assert config.rollout_cost == pytest.approx(1 / 256)
    assert config.success_threshold == 0.5  # middle of the default reward range (0, 1)
    assert config.scale_rewards == config.advantage_scale == "none"
    assert isinstance(config, GRPOConfig)


def test_success_threshold_defaults_to_the_middle_of_the_reward_range(tmp_path):
    assert make(tmp_path, reward_range=[-1, 1]).success_threshold == 0.0


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"max_num_generations": 2}, "max_num_generations"),
        ({"rollout_cost": -1.0}, "rollout_cost"),
        ({"rollout_cost": float("nan")}, "rollout_cost"),
        ({"noise_model": "gaussian"}, "noise_model"),
        ({"reward_range": [1.0, 0.0]}, "reward_range"),
        ({"success_threshold": 2.0}, "success_threshold"),
        ({"osla_mode": "greedy"}, "osla_mode"),
        ({"max_rollout_rounds": -1}, "max_rollout_rounds"),
        ({"rollout_budget": -3}, "rollout_budget"),
        ({"prior_min_context": 999}, "prior_min_context"),
        ({"value_prior": " "}, "value_prior"),
        ({"advantage_scale": "sometimes"}, "advantage_scale"),
        ({"scale_rewards": "group"}, "advantage_scale"),
        ({"multi_objective_aggregation": "normalize_then_sum"}, "multi_objective_aggregation"),
    ],
)
def test_bad_settings_fail_at_construction_naming_the_field(tmp_path, kwargs, field):
    with pytest.raises(ValueError, match=field):
        make(tmp_path, **kwargs)


def test_scale_rewards_may_repeat_advantage_scale(tmp_path):
    config = make(tmp_path, advantage_scale="group", scale_rewards=True)
    assert config.scale_rewards == "group"


def test_each_prompt_must_stay_on_one_process(tmp_path, monkeypatch):
    # Two processes with 2 rows each: TRL accepts the global batch of 4, but a group of 4 would span processes.
    monkeypatch.setattr(V05GRPOConfig, "world_size", property(lambda self: 2))
    with pytest.raises(ValueError, match="stay on one process"):
        V05GRPOConfig(output_dir=str(tmp_path), report_to=[], use_cpu=True, per_device_train_batch_size=2)
