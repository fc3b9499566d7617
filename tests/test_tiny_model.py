from transformers import AutoModelForCausalLM, AutoTokenizer

from v05_trl.tiny_model import build_tiny_tokenizer


def test_tokenizer_reloads_with_the_same_ids(tiny_model_path):
    reloaded = AutoTokenizer.from_pretrained(tiny_model_path)
    fresh = build_tiny_tokenizer()
    text = "What is 123 + 45? The answer is \\boxed{168}."
    assert reloaded(text).input_ids == fresh(text).input_ids
    assert reloaded.decode(reloaded(text).input_ids) == text
    assert reloaded.eos_token == "<|im_end|>" and reloaded.pad_token == "<|endoftext|>"


def test_chat_template_is_chatml(tiny_model_path):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_path)
    rendered = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is 2 + 2?"}], tokenize=False, add_generation_prompt=True
    )
    assert rendered == "<|im_start|>user\nWhat is 2 + 2?<|im_end|>\n<|im_start|>assistant\n"


def test_model_loads_and_generates(tiny_model_path):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_path)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_path)
    assert model.config.num_hidden_layers == 2
    inputs = tokenizer(["What is 1 + 1?"], return_tensors="pt")
    out = model.generate(**inputs, max_new_tokens=5, do_sample=False)
    assert out.shape[1] <= inputs.input_ids.shape[1] + 5
    assert out.shape[1] > inputs.input_ids.shape[1]
