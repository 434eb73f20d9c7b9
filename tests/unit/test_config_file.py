"""``--config FILE.toml``: a run's flags from a file, the command line winning; every flag of
``run`` works there, including one added to the parser later."""

from __future__ import annotations

from pathlib import Path

import pytest

from chunkmill.pipeline import config_file
from chunkmill.pipeline.cli import main
from chunkmill.pipeline.commands.run import build_parser, run_settings
from chunkmill.pipeline.options import UsageError


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    for name in ("docs", "more"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "a.md").write_text("# A\n\nhello\n")
    return tmp_path


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_flags_and_beam_flags_come_from_the_file(corpus):
    config = write(
        corpus / "nightly.toml",
        f"""
input = ["{corpus}/docs/*", "{corpus}/more/*"]
output = "{corpus}/out"
run-id = "nightly-1"
strategy = "paragraph"
max-tokens = 300
overlap-tokens = 20
max-error-ratio = 0.5
beam-args = ["--direct_running_mode=in_memory"]

[beam]
direct_num_workers = 1
experiments = ["a", "b"]
""",
    )
    settings = run_settings(["--config", str(config)])
    assert settings.inputs == (f"{corpus}/docs/*", f"{corpus}/more/*")
    assert (settings.output, settings.run_id) == (f"{corpus}/out", "nightly-1")
    params = settings.config.description["params"]
    assert (params["max_tokens"], params["overlap_tokens"]) == (300, 20)
    assert settings.max_error_ratio == 0.5
    assert "--direct_num_workers=1" in settings.beam_args
    assert {"--experiments=a", "--experiments=b"} <= set(settings.beam_args)
    assert "--direct_running_mode=in_memory" in settings.beam_args


def test_the_command_line_wins_over_the_file(corpus):
    config = write(
        corpus / "c.toml",
        f"""
input = ["{corpus}/docs/*"]
max-tokens = 512
strategy = "paragraph"
[beam]
direct_num_workers = 3
""",
    )
    settings = run_settings(
        [
            f"--config={config}",
            "--max-tokens=200",
            "--input",
            f"{corpus}/more/*",
            "--direct_num_workers",
            "1",
        ]
    )
    assert settings.config.description["params"]["max_tokens"] == 200
    assert settings.inputs == (f"{corpus}/more/*",)  # replaced, not added to
    assert "--direct_num_workers=3" not in settings.beam_args


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("max-token = 5", "unknown key 'max-token'; did you mean max-tokens?"),
        ("max_tokens = 5", "unknown key 'max_tokens'; did you mean max-tokens?"),
        ("colour = 'blue'", "unknown key 'colour'"),
        ("config = 'other.toml'", "unknown key 'config'"),
        (
            "[beam]\nrunnr = 'DirectRunner'",
            "[beam] unknown Beam flag 'runnr'; did you mean runner?",
        ),
        ("max-tokens = [1, 2]", "max-tokens takes one value, got a list"),
        ("beam-args = '--x'", "beam-args must be a list of strings"),
        ("max-tokens = = 5", "is not valid TOML"),
        ("max-tokens = 'lots'", "argument --max-tokens: must be an integer, got 'lots'"),
    ],
)
def test_a_bad_file_is_one_line_naming_the_file_and_key(text, message, corpus, capsys):
    config = write(corpus / "bad.toml", text)
    assert main(["run", "--input", f"{corpus}/docs/*", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("chunkmill: error: "), err
    assert message in err, err
    if "argument --max-tokens" not in message:
        assert f"argument --config: {config}" in err


def test_a_missing_file_is_one_line(corpus, capsys):
    assert main(["plan", "--config", str(corpus / "nowhere.toml")]) == 2
    err = capsys.readouterr().err
    assert (
        err == f"chunkmill: error: argument --config: cannot read {corpus}/nowhere.toml: "
        "No such file or directory\n"
    )


def test_plan_takes_it_too(corpus, capsys):
    config = write(corpus / "c.toml", f'input = ["{corpus}/docs/*"]\noutput = "{corpus}/out"\n')
    assert main(["plan", "--config", str(config)]) == 0
    assert "new 1" in capsys.readouterr().out


def test_a_flag_added_to_the_parser_later_works_with_no_code(tmp_path):
    parser = build_parser()
    parser.add_argument("--frobnicate-level", type=int)
    parser.add_argument("--skip-images", action="store_true")
    parser.add_argument("--label", action="append")
    config = write(
        tmp_path / "c.toml",
        'frobnicate-level = 3\nskip-images = true\nlabel = ["a", "b"]\n',
    )
    argv = config_file.apply(parser, ["--config", str(config), "--label=c"])
    args, _ = parser.parse_known_args(argv)
    assert (args.frobnicate_level, args.skip_images, args.label) == (3, True, ["c"])
    with pytest.raises(UsageError, match="skip-images takes true or false"):
        config_file.apply(parser, ["--config", str(write(tmp_path / "d.toml", "skip-images = 1"))])
