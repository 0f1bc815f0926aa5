"""Tiny, randomly initialised VLMs (LLaVA-style, Qwen2-VL) with offline tokenizers, for tests and
smoke runs.

Nothing is downloaded: the config is written here, the tokenizer is a byte-level BPE with no
merges built with the `tokenizers` library (every byte is one token), and the chat template is a
Qwen2-style one. Its answers are noise; it exists to run the hf adapter end to end (CPU in CI,
CUDA on a GPU machine) through exactly the code path a real checkpoint takes.
"""

from __future__ import annotations

from pathlib import Path

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
]
LLAVA_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}{{ message['content'] if message['content'] is string "
    "else message['content'][0]['text'] }}\n"
    "{% else %}{{ message['role'] | upper }}: "
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<image>\n{% elif part['type'] == 'text' %}{{ part['text'] }}"
    "{% endif %}{% endfor %}{% endif %}</s>\n{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}ASSISTANT:{% endif %}"
)


def _byte_tokenizer(special: list[str], eos: str, pad: str, **extra):  # type: ignore[no-untyped-def]
    """A byte-level BPE with no merges (every byte one token) plus special tokens: offline, small."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {ch: i for i, ch in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(special)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token=eos, pad_token=pad, model_max_length=4096,
        **({"bos_token": None} | extra),
    )
    fast.padding_side = "left"
    return fast


def build_tiny_llava(out_dir: str | Path, seed: int = 0) -> Path:
    """Write a ~1 MB LLaVA-style checkpoint (CLIP vision tower + Llama) + processor to out_dir.

    Works with torch + transformers alone (no torchvision), so it is the model CI tests with."""
    import torch
    from transformers import (
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
    )

    try:  # torchvision-free image processor where transformers has one
        from transformers import CLIPImageProcessorPil as _ImageProcessor
    except ImportError:
        from transformers import CLIPImageProcessor as _ImageProcessor

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    special = ["<s>", "</s>", "<pad>", "<image>"]
    fast = _byte_tokenizer(special, eos="</s>", pad="<pad>")
    ids = {t: fast.convert_tokens_to_ids(t) for t in special}
    size, patch = 28, 14  # 2x2 patches -> 4 image tokens
    image_processor = _ImageProcessor(
        size={"shortest_edge": size}, crop_size={"height": size, "width": size}
    )
    processor = LlavaProcessor(
        image_processor=image_processor,
        tokenizer=fast,
        patch_size=patch,
        vision_feature_select_strategy="full",
        chat_template=LLAVA_CHAT_TEMPLATE,
        image_token="<image>",
        num_additional_image_tokens=1,  # CLIP's CLS token; "full" keeps it
    )
    cfg = LlavaConfig(
        vision_config=CLIPVisionConfig(
            hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
            image_size=size, patch_size=patch, projection_dim=32,
        ),
        text_config=LlamaConfig(
            vocab_size=len(fast), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
            bos_token_id=ids["<s>"], eos_token_id=ids["</s>"], pad_token_id=ids["<pad>"],
        ),
        image_token_id=ids["<image>"],
        vision_feature_select_strategy="full",
        vision_feature_layer=-1,
    )
    torch.manual_seed(seed)
    model = LlavaForConditionalGeneration(cfg)
    model.generation_config.eos_token_id = ids["</s>"]
    model.generation_config.pad_token_id = ids["<pad>"]
    model.save_pretrained(out)
    processor.save_pretrained(out)
    return out


def build_tiny_qwen2vl(out_dir: str | Path, seed: int = 0) -> Path:
    """Write a ~1 MB Qwen2-VL checkpoint + processor to out_dir; returns the path.

    Needs torchvision: transformers 5 builds no Qwen2-VL processor without it (its video processor)."""
    import torch
    from transformers import (
        Qwen2VLConfig,
        Qwen2VLForConditionalGeneration,
        Qwen2VLProcessor,
    )

    try:  # torchvision-free image processor where transformers has one
        from transformers import Qwen2VLImageProcessorPil as _ImageProcessor
    except ImportError:  # older transformers
        from transformers import Qwen2VLImageProcessor as _ImageProcessor

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    fast = _byte_tokenizer(SPECIAL, eos="<|im_end|>", pad="<|endoftext|>")
    ids = {t: fast.convert_tokens_to_ids(t) for t in SPECIAL}
    # image: 28 px patches merged 2x2 -> few tokens per image; pixel bounds keep it tiny
    image_processor = _ImageProcessor(
        min_pixels=56 * 56, max_pixels=112 * 112, patch_size=14, merge_size=2, temporal_patch_size=2
    )
    from transformers import Qwen2VLVideoProcessor  # a placeholder without torchvision: fails here

    video_processor = Qwen2VLVideoProcessor(
        min_pixels=56 * 56, max_pixels=112 * 112, patch_size=14, merge_size=2, temporal_patch_size=2
    )
    processor = Qwen2VLProcessor(
        image_processor=image_processor,
        tokenizer=fast,
        video_processor=video_processor,
        chat_template=CHAT_TEMPLATE,
    )
    cfg = Qwen2VLConfig(
        text_config=dict(
            vocab_size=len(fast),
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=4096,
            rope_scaling={"type": "mrope", "mrope_section": [1, 1, 2]},
            bos_token_id=ids["<|endoftext|>"],
            eos_token_id=ids["<|im_end|>"],
            pad_token_id=ids["<|endoftext|>"],
        ),
        vision_config=dict(
            depth=1,
            embed_dim=32,
            hidden_size=32,
            num_heads=2,
            mlp_ratio=2,
            patch_size=14,
            spatial_merge_size=2,
            temporal_patch_size=2,
            in_channels=3,
        ),
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
    )
    torch.manual_seed(seed)
    model = Qwen2VLForConditionalGeneration(cfg)
    model.generation_config.eos_token_id = ids["<|im_end|>"]
    model.generation_config.pad_token_id = ids["<|endoftext|>"]
    model.save_pretrained(out)
    processor.save_pretrained(out)
    return out


GEMMA3_CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "<start_of_turn>{{ 'model' if message['role'] == 'assistant' else 'user' }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<start_of_image>{% elif part['type'] == 'text' %}"
    "{{ part['text'] }}{% endif %}{% endfor %}{% endif %}<end_of_turn>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)


def build_tiny_gemma3(out_dir: str | Path, seed: int = 0) -> Path:
    """Write a ~1 MB Gemma-3-style (MedGemma's architecture) checkpoint + processor to out_dir.

    Gemma 3 places the image as <start_of_image> + N soft tokens + <end_of_image>; its template has
    no system role (the adapter folds the system prompt into the user turn). No torchvision needed."""
    import torch
    from transformers import (
        Gemma3Config,
        Gemma3ForConditionalGeneration,
        Gemma3Processor,
        SiglipVisionConfig,
    )

    try:
        from transformers import Gemma3ImageProcessorPil as _ImageProcessor
    except ImportError:
        from transformers import Gemma3ImageProcessor as _ImageProcessor

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    special = ["<bos>", "<eos>", "<pad>", "<start_of_turn>", "<end_of_turn>",
               "<start_of_image>", "<end_of_image>", "<image_soft_token>"]
    fast = _byte_tokenizer(
        special, eos="<end_of_turn>", pad="<pad>", bos_token="<bos>",
        extra_special_tokens={
            "boi_token": "<start_of_image>",
            "eoi_token": "<end_of_image>",
            "image_token": "<image_soft_token>",
        },
    )
    ids = {t: fast.convert_tokens_to_ids(t) for t in special}
    size, patch, tokens_per_image = 28, 14, 4  # 2x2 patches pooled to 4 soft tokens
    image_processor = _ImageProcessor(size={"height": size, "width": size})
    processor = Gemma3Processor(
        image_processor=image_processor,
        tokenizer=fast,
        image_seq_length=tokens_per_image,
        chat_template=GEMMA3_CHAT_TEMPLATE,
    )
    cfg = Gemma3Config(
        text_config=dict(
            vocab_size=len(fast), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=4096,
            sliding_window=64, bos_token_id=ids["<bos>"], eos_token_id=ids["<end_of_turn>"],
            pad_token_id=ids["<pad>"],
        ),
        vision_config=SiglipVisionConfig(
            hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
            image_size=size, patch_size=patch,
        ),
        mm_tokens_per_image=tokens_per_image,
        boi_token_index=ids["<start_of_image>"],
        eoi_token_index=ids["<end_of_image>"],
        image_token_index=ids["<image_soft_token>"],
    )
    torch.manual_seed(seed)
    model = Gemma3ForConditionalGeneration(cfg)
    model.generation_config.eos_token_id = ids["<end_of_turn>"]
    model.generation_config.pad_token_id = ids["<pad>"]
    model.save_pretrained(out)
    processor.save_pretrained(out)
    return out
