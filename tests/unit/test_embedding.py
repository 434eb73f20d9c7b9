"""The model key is the identity of what makes a vector, and embed's flags are checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chunkmill import embedding
from chunkmill.pipeline.cli import main
from chunkmill.pipeline.commands.embed import parse
from chunkmill.pipeline.options import UsageError


def model_folder(root: Path, *, normalize: bool = True, dimension: int = 8) -> Path:
    """A sentence-transformers folder's files (small stand-ins for the weights)."""
    root.mkdir()
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {
            "idx": 1,
            "name": "1",
            "path": "1_Pooling",
            "type": "sentence_transformers.models.Pooling",
        },
    ]
    if normalize:
        modules.append(
            {
                "idx": 2,
                "name": "2",
                "path": "2_Normalize",
                "type": "sentence_transformers.models.Normalize",
            }
        )
    (root / "modules.json").write_text(json.dumps(modules))
    (root / "1_Pooling").mkdir()
    pooling = {"word_embedding_dimension": dimension, "pooling_mode_mean_tokens": True}
    (root / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    (root / "config.json").write_text(json.dumps({"hidden_size": dimension}))
    (root / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 128}))
    (root / "model.safetensors").write_bytes(bytes(range(256)) * 4)
    (root / "tokenizer.json").write_text('{"model": {"vocab": {"a": 0}}}')
    (root / "README.md").write_text("# a model\n")
    return root


def test_describe_reads_dimension_normalisation_and_sequence_length(tmp_path):
    model = embedding.describe(str(model_folder(tmp_path / "m", dimension=12)))
    assert (model.dimension, model.normalized, model.max_seq_length) == (12, True, 128)
    assert not embedding.describe(str(model_folder(tmp_path / "n", normalize=False))).normalized


@pytest.mark.parametrize(
    ("change", "same_key"),
    [
        (lambda m: (m / "README.md").write_text("# edited\n"), True),
        (
            lambda m: (m / "model.safetensors").write_bytes(
                b"\x01" + (m / "model.safetensors").read_bytes()[1:]
            ),
            False,
        ),
        (lambda m: (m / "tokenizer.json").write_text('{"model": {"vocab": {"b": 0}}}'), False),
        (
            lambda m: (m / "1_Pooling" / "config.json").write_text(
                json.dumps({"word_embedding_dimension": 8, "pooling_mode_cls_token": True})
            ),
            False,
        ),
        (
            lambda m: (m / "modules.json").write_text(
                (m / "modules.json").read_text().replace("2_Normalize", "x")
            ),
            False,
        ),
    ],
    ids=["readme", "weights", "tokenizer", "pooling", "normalisation"],
)
def test_the_key_changes_with_what_makes_a_vector_and_only_with_that(tmp_path, change, same_key):
    folder = model_folder(tmp_path / "m")
    before = embedding.model_key(folder)
    assert embedding.model_key(folder) == before  # stable
    change(folder)
    assert (embedding.model_key(folder) == before) is same_key


def test_the_same_files_elsewhere_have_the_same_key(tmp_path):
    a, b = model_folder(tmp_path / "a"), model_folder(tmp_path / "b")
    assert embedding.model_key(a) == embedding.model_key(b)


def test_the_default_model_is_the_packaged_one():
    model = embedding.describe()
    assert (model.name, model.dimension, model.normalized) == ("all-minilm-l6-v2", 384, True)
    assert (model.path / "model.safetensors").is_file()


@pytest.mark.parametrize(
    ("argv", "names"),
    [
        (["--batch-size", "0"], "--batch-size"),
        (["--texts-per-file", "0"], "--texts-per-file"),
        (["--bacth-size", "4"], "--batch-size"),
        (["--model", "/nowhere/model"], "--model"),
    ],
)
def test_a_wrong_embed_flag_is_one_line_naming_it(tmp_path, capsys, argv, names):
    assert main(["embed", "--output", str(tmp_path), *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and names in err


def test_embed_without_a_run_says_to_run_first(tmp_path, capsys):
    assert main(["embed", "--output", str(tmp_path / "empty"), "--dry-run"]) == 2
    assert "run chunkmill run first" in capsys.readouterr().err


def test_parse_embed_passes_beam_flags_on():
    settings = parse(["--output", "/o", "--runner", "DirectRunner", "--batch-size", "8"])
    assert settings.beam_args == ("--runner", "DirectRunner") and settings.batch_size == 8
    with pytest.raises(UsageError):
        parse(["--no-such-flag"])


def add_dense(folder: Path, out_features: int) -> None:
    """A ``Dense`` projection after the pooling, as sentence-transformers saves one."""
    modules = json.loads((folder / "modules.json").read_text())
    dense = {"idx": 9, "name": "9", "path": "9_Dense", "type": "sentence_transformers.models.Dense"}
    modules.insert(2, dense)
    (folder / "modules.json").write_text(json.dumps(modules))
    (folder / "9_Dense").mkdir()
    config = {"in_features": 8, "out_features": out_features, "bias": True}
    (folder / "9_Dense" / "config.json").write_text(json.dumps(config))


def test_the_dimension_is_what_leaves_the_last_module_that_sets_it(tmp_path):
    folder = model_folder(tmp_path / "m", dimension=8)
    add_dense(folder, 4)
    assert embedding.describe(str(folder)).dimension == 4  # the projection's, not the pooling's


def test_pooling_modes_each_add_the_token_width(tmp_path):
    folder = model_folder(tmp_path / "m", dimension=8)
    modules = json.loads((folder / "modules.json").read_text())
    config = folder / "1_Pooling" / "config.json"
    for pooling, width in [
        ({"embedding_dimension": 8, "pooling_mode": ["cls", "mean"]}, 16),
        ({"embedding_dimension": 8, "pooling_mode": "max"}, 8),
        (
            {
                "word_embedding_dimension": 8,
                "pooling_mode_cls_token": True,
                "pooling_mode_max_tokens": True,
                "pooling_mode_mean_tokens": True,
            },
            24,
        ),
    ]:
        config.write_text(json.dumps(pooling))
        assert embedding.config_dimension(folder, modules) == width


def test_a_module_of_unknown_width_is_asked_of_the_loaded_model(tmp_path, monkeypatch):
    folder = model_folder(tmp_path / "m", dimension=8)
    modules = json.loads((folder / "modules.json").read_text())
    modules.insert(2, {"idx": 5, "name": "5", "path": "5_X", "type": "custom.Projection"})
    (folder / "modules.json").write_text(json.dumps(modules))
    assert embedding.config_dimension(folder, modules) is None
    monkeypatch.setattr(embedding, "loaded_dimension", lambda path: 5)
    assert embedding.describe(str(folder)).dimension == 5
