"""V05GRPOTrainer on the tiny offline model, on CPU: staged rollouts, advantages, padding, TRL features."""

import json
import math

import pandas as pd
import pytest
import torch
from trainer_helpers import (
    PROMPTS,
    base_config,
    constant_reward,
    conversational_dataset,
    generation_batch,
    parity_reward,
    plain_dataset,
)
from trl import GRPOConfig, GRPOTrainer

from v05_trl import V05GRPOTrainer
from v05_trl.trainer import _MEAN_REAL_ROWS, PRIOR_STATE_FILE, select_rows

TRL_LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo", "luspo", "cispo", "sapo", "vespo")


@pytest.fixture
def make_trainer(tiny_model_path, tmp_path):
    def make(reward=parity_reward, dataset=None, value_prior=None, **overrides):
        args = base_config(tmp_path / "out", **overrides)
        trainer = V05GRPOTrainer(
            model=str(tiny_model_path),
            reward_funcs=reward,
            args=args,
            train_dataset=dataset if dataset is not None else plain_dataset(),
            value_prior=value_prior,
        )
        trainer.model.train()
        trainer.current_gradient_accumulation_steps = 1
        return trainer

    return make


def last(trainer, key):
    return trainer._metrics["train"][key][-1]


def score_batch(trainer, num_prompts=2):
    torch.manual_seed(0)
    return trainer._generate_and_score_completions(generation_batch(PROMPTS[:num_prompts], trainer.num_generations))


# ----------------------------------------------------------------------------------------------------------------
# Rollout allocation
# ----------------------------------------------------------------------------------------------------------------


def test_an_accepted_prior_draws_no_extra_round(make_trainer):
    # Every reward equals the prior's value: no evidence against it, so OSLA stops at k_init.
    trainer = make_trainer(reward=constant_reward(0.5), value_prior="constant:0.5")
    output = score_batch(trainer)
    assert output["completion_ids"].shape[0] == 8
    assert last(trainer, "v05/rounds") == 0
    assert last(trainer, "v05/rollouts_per_prompt/max") == 4
    assert last(trainer, "v05/prior_rejected_frac") == 0
    assert torch.equal(output["advantages"], torch.zeros(8))  # baseline = prior = reward


def test_a_rejected_prior_draws_up_to_k_max_in_one_planned_round(make_trainer):
    trainer = make_trainer(reward=constant_reward(1.0), value_prior="constant:0.0")
    output = score_batch(trainer)
    assert output["completion_ids"].shape[0] == 2 * 16
    assert last(trainer, "v05/rounds") == 1
    assert last(trainer, "v05/rollouts_per_prompt/mean") == 16
    assert last(trainer, "v05/prior_rejected_frac") == 1
    assert last(trainer, "v05/completions") == 32
    assert last(trainer, "num_tokens") == trainer.state.num_input_tokens_seen
    assert len(trainer._logs["advantages"]) == len(trainer._logs["prompt"]) == 32


def test_sequential_mode_adds_one_rollout_per_round(make_trainer):
    trainer = make_trainer(
        reward=constant_reward(1.0), value_prior="constant:0.0", osla_mode="sequential", max_rollout_rounds=3
    )
    output = score_batch(trainer)
    assert output["completion_ids"].shape[0] == 2 * (4 + 3)
    assert last(trainer, "v05/rounds") == 3


def test_rollout_budget_caps_the_extra_rollouts_of_a_batch(make_trainer):
    trainer = make_trainer(reward=constant_reward(1.0), value_prior="constant:0.0", rollout_budget=5)
    output = score_batch(trainer)
    assert last(trainer, "v05/completions") == 8 + 5
    assert output["completion_ids"].shape[0] == 13


def test_value_prior_none_with_k_max_above_k_init_stays_plain_grpo(make_trainer):
    trainer = make_trainer(reward=parity_reward)
    score_batch(trainer)
    assert last(trainer, "v05/rounds") == 0
    assert last(trainer, "v05/prior_coverage") == 0


# ----------------------------------------------------------------------------------------------------------------
# Advantages
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("scale", ["none", "group", "batch"])
def test_without_prior_and_extra_rollouts_it_matches_grpo_trainer(tiny_model_path, tmp_path, scale):
    settings = dict(
        output_dir=str(tmp_path),
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=8,
        report_to=[],
        use_cpu=True,
        seed=0,
        loss_type="dapo",
    )
    reference = GRPOTrainer(
        model=str(tiny_model_path),
        reward_funcs=parity_reward,
        args=GRPOConfig(scale_rewards=scale, **settings),
        train_dataset=plain_dataset(),
    )
    ours = V05GRPOTrainer(
        model=str(tiny_model_path),
        reward_funcs=parity_reward,
        args=base_config(advantage_scale=scale, max_num_generations=4, **settings),
        train_dataset=plain_dataset(),
    )
    results = []
    for trainer in (reference, ours):
        trainer.model.train()
        trainer.current_gradient_accumulation_steps = 1
        output = score_batch(trainer)
        loss = trainer.compute_loss(trainer.model, output)
        results.append((output, loss))
    (expected, expected_loss), (actual, actual_loss) = results
    assert torch.equal(expected["completion_ids"], actual["completion_ids"])
    assert expected["advantages"].abs().sum() > 0
    torch.testing.assert_close(actual["advantages"], expected["advantages"], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(actual_loss, expected_loss, atol=1e-6, rtol=1e-5)
    assert actual["num_items_in_batch"] == expected["num_items_in_batch"]


def test_unscorable_completions_get_zero_advantage_and_do_not_count(make_trainer):
    def half_unscorable(completions, **kwargs):
        return [None if i % 2 else 1.0 for i in range(len(completions))]

    trainer = make_trainer(reward=half_unscorable, value_prior="constant:0.0", max_num_generations=8)
    output = score_batch(trainer)
    rewards = torch.tensor(list(trainer._logs["rewards"]["half_unscorable"]))
    advantages = torch.tensor(list(trainer._logs["advantages"]))
    assert rewards.isnan().any() and (advantages[rewards.isnan()] == 0).all()
    assert (advantages[~rewards.isnan()] > 0).all()  # reward 1 against a rejected prior of 0
    assert output["advantages"].shape[0] == output["completion_ids"].shape[0]
    assert last(trainer, "v05/rollouts_per_prompt/max") <= 8  # unscorable rollouts count against k_max


def test_a_group_with_no_scorable_completion_draws_nothing_more(make_trainer):
    trainer = make_trainer(reward=constant_reward(None), value_prior="constant:0.0")
    output = score_batch(trainer)
    assert output["completion_ids"].shape[0] == 8
    assert torch.equal(output["advantages"], torch.zeros(8))


@pytest.mark.parametrize("scale", ["group", "batch"])
def test_zero_spread_keeps_the_unscaled_advantage(make_trainer, scale):
    trainer = make_trainer(reward=constant_reward(1.0), value_prior="constant:0.9", advantage_scale=scale)
    output = score_batch(trainer)
    assert torch.isfinite(output["advantages"]).all()
    assert output["advantages"].abs().max() <= 1.0


def test_rewards_outside_reward_range_are_an_error(make_trainer):
    trainer = make_trainer(reward=constant_reward(2.0), value_prior="constant:0.5")
    with pytest.raises(ValueError, match="reward_range"):
        score_batch(trainer)


# ----------------------------------------------------------------------------------------------------------------
# Padding rows
# ----------------------------------------------------------------------------------------------------------------


def test_batches_are_padded_to_a_multiple_of_steps_per_generation(make_trainer):
    trainer = make_trainer(
        reward=constant_reward(1.0),
        value_prior="constant:0.0",
        rollout_budget=1,
        steps_per_generation=2,
        per_device_train_batch_size=4,
    )
    output = score_batch(trainer)
    assert output["completion_ids"].shape[0] == 10  # 9 real rows, one padding row
    assert output["completion_mask"][9].sum() == 0 and output["advantages"][9] == 0
    assert output["num_items_in_batch"] == output["completion_mask"].sum()
    assert output[_MEAN_REAL_ROWS] == pytest.approx(9 / 2)


@pytest.mark.parametrize("loss_type", TRL_LOSS_TYPES)
def test_padding_rows_change_neither_loss_nor_gradients_nor_metrics(make_trainer, loss_type):
    trainer = make_trainer(
        reward=parity_reward,
        value_prior="constant:0.0",
        rollout_budget=1,
        steps_per_generation=2,
        per_device_train_batch_size=4,
        beta=0.1,
    )
    trainer.loss_type = loss_type
    padded = score_batch(trainer)
    padded[_MEAN_REAL_ROWS] = torch.tensor(9.0)  # the whole batch as one micro-batch
    unpadded = select_rows(padded, torch.arange(9), 10)

    def run(inputs):
        trainer.model.zero_grad()
        metrics = trainer._metrics["train"]
        before = {key: len(values) for key, values in metrics.items()}
        loss = trainer.compute_loss(trainer.model, inputs)
        loss.backward()
        grads = [p.grad.clone() for p in trainer.model.parameters() if p.grad is not None]
        logged = {key: values[before.get(key, 0) :] for key, values in metrics.items()}
        return loss.detach(), grads, logged

    loss_padded, grads_padded, logged_padded = run(padded)
    loss_unpadded, grads_unpadded, logged_unpadded = run(unpadded)
    torch.testing.assert_close(loss_padded, loss_unpadded)
    assert grads_unpadded and any(g.abs().sum() > 0 for g in grads_unpadded)
    for a, b in zip(grads_padded, grads_unpadded, strict=True):
        torch.testing.assert_close(a, b, atol=1e-7, rtol=1e-5)
    assert logged_padded.keys() == logged_unpadded.keys()
    for key in logged_unpadded:
        assert logged_padded[key] == pytest.approx(logged_unpadded[key], nan_ok=True), key


# ----------------------------------------------------------------------------------------------------------------
# Training with TRL's features
# ----------------------------------------------------------------------------------------------------------------


def train_and_check(trainer):
    trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert losses and all(math.isfinite(x) for x in losses)
    return trainer


@pytest.mark.parametrize("loss_type", TRL_LOSS_TYPES)
def test_every_trl_loss_type_trains_with_extra_rounds(make_trainer, loss_type):
    trainer = train_and_check(make_trainer(value_prior="constant:0.0", loss_type=loss_type, max_steps=1))
    assert trainer.state.log_history[0]["v05/rounds"] == 1


def test_conversational_prompts(make_trainer):
    trainer = train_and_check(make_trainer(dataset=conversational_dataset(), value_prior="history", max_steps=2))
    assert trainer.value_prior.step == 2


def test_reference_model_with_beta(make_trainer):
    trainer = train_and_check(make_trainer(value_prior="constant:0.0", beta=0.1))
    assert all("kl" in entry for entry in trainer.state.log_history if "loss" in entry)


def test_peft_lora_with_beta(make_trainer):
    from peft import LoraConfig

    trainer = make_trainer(value_prior="constant:0.0", beta=0.1)
    trainer = V05GRPOTrainer(
        model=trainer.model.name_or_path,
        reward_funcs=parity_reward,
        args=trainer.args,
        train_dataset=plain_dataset(),
        peft_config=LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]),
    )
    train_and_check(trainer)
    assert any("lora" in name for name, p in trainer.model.named_parameters() if p.requires_grad)


def test_iterations_accumulation_and_steps_per_generation(make_trainer, monkeypatch):
    calls = []
    original = V05GRPOTrainer._generate_and_score_completions

    def counting(self, inputs):
        output = original(self, inputs)
        calls.append(output["completion_ids"].shape[0])
        return output

    monkeypatch.setattr(V05GRPOTrainer, "_generate_and_score_completions", counting)
    trainer = make_trainer(
        value_prior="constant:0.0",
        per_device_train_batch_size=4,
        gradient_accumulation_steps=2,
        steps_per_generation=2,
        num_iterations=2,
        max_steps=4,
    )
    train_and_check(trainer)
    # 4 optimizer steps x 2 micro-steps, one generation per steps_per_generation * num_iterations = 4 micro-steps.
    assert len(calls) == 2
    assert all(rows % 2 == 0 and rows > 8 for rows in calls)


def test_truncated_completions_are_masked(make_trainer):
    trainer = make_trainer(value_prior="constant:0.0", max_completion_length=3, mask_truncated_completions=True)
    output = score_batch(trainer)
    truncated_rows = output["completion_mask"].sum(dim=1) == 0
    assert truncated_rows.any()
    assert output["num_items_in_batch"] == output["completion_mask"].sum()
    train_and_check(trainer)


def test_save_and_resume_continue_like_an_uninterrupted_run(tiny_model_path, tmp_path):
    def run(output_dir, max_steps, resume=None):
        args = base_config(output_dir, value_prior="history", max_steps=max_steps, save_strategy="steps", save_steps=2)
        trainer = V05GRPOTrainer(
            model=str(tiny_model_path), reward_funcs=parity_reward, args=args, train_dataset=plain_dataset()
        )
        trainer.train(resume_from_checkpoint=resume)
        return trainer

    straight = run(tmp_path / "straight", 4)
    checkpoint = tmp_path / "straight" / "checkpoint-2"
    assert json.loads((checkpoint / PRIOR_STATE_FILE).read_text())["step"] == 2
    assert "2603.10848" in (tmp_path / "straight" / "README.md").read_text()  # model card citing V0.5
    resumed = run(tmp_path / "resumed", 4, resume=str(checkpoint))
    assert resumed.value_prior.state_dict() == straight.value_prior.state_dict()
    for a, b in zip(straight.model.parameters(), resumed.model.parameters(), strict=True):
        torch.testing.assert_close(a, b)


def test_resuming_without_prior_state_is_an_error(tiny_model_path, tmp_path):
    checkpoint = tmp_path / "checkpoint-1"
    checkpoint.mkdir()
    trainer = V05GRPOTrainer(
        model=str(tiny_model_path),
        reward_funcs=parity_reward,
        args=base_config(tmp_path, value_prior="history"),
        train_dataset=plain_dataset(),
    )
    with pytest.raises(FileNotFoundError, match=PRIOR_STATE_FILE):
        trainer._load_optimizer_and_scheduler(str(checkpoint))


def test_args_must_be_a_v05_config(tiny_model_path, tmp_path):
    with pytest.raises(TypeError, match="V05GRPOConfig"):
        V05GRPOTrainer(
            model=str(tiny_model_path),
            reward_funcs=parity_reward,
            args=GRPOConfig(output_dir=str(tmp_path), report_to=[], use_cpu=True, per_device_train_batch_size=8),
            train_dataset=plain_dataset(),
        )


def test_an_invalid_prior_spec_fails_at_construction(make_trainer):
    with pytest.raises(ValueError, match="value_prior"):
        make_trainer(value_prior="oracle")


def test_completions_table_keeps_real_rows_aligned(make_trainer, tmp_path):
    def logging_reward(completions, log_extra, **kwargs):
        log_extra("length", [len(c) for c in completions])
        return [1.0] * len(completions)

    trainer = make_trainer(
        reward=logging_reward, value_prior="constant:0.0", log_completions=True, max_steps=1, rollout_budget=3
    )
    train_and_check(trainer)  # log() builds the table from every column: their lengths must agree
    table = sorted((tmp_path / "out" / "completions").glob("*.parquet"))
    frame = pd.read_parquet(table[-1])
    assert len(frame) == 8 + 3
    assert frame["length"].tolist() == [len(c) for c in frame["completion"]]
