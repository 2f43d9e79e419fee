"""`understudy --help`, `understudy COMMAND --help` and `-h`: usage with every option and an example,
exit 0; the bash completion script knows every command and option. (No network: runs anywhere.)"""

from __future__ import annotations

import re
import subprocess

import pytest

from harness import run_understudy

COMMANDS = ["serve", "token", "join", "invite", "pubsub", "whip", "whep", "load", "scenario", "worker", "jobs",
            "demo", "bench"]


def test_top_level_help_lists_every_command(understudy):
    for flag in ("--help", "-h", "help"):
        result = run_understudy([flag], timeout=30)
        assert result.returncode == 0, result
        for command in COMMANDS:
            assert re.search(rf"^\s+{command}\b", result.stdout, re.M), (command, result.stdout)


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_command_help_shows_usage_options_and_an_example(understudy, command, flag):
    result = run_understudy([command, flag], timeout=30)
    assert result.returncode == 0, result
    out = result.stdout
    assert out.startswith(f"usage: understudy {command}"), out
    assert "example" in out and f"understudy {command}" in out.split("example", 1)[1], out
    # `help COMMAND` prints the same page.
    assert run_understudy(["help", command], timeout=30).stdout == out
    # Every option the command accepts is in its help: the parser takes its names from the same
    # table, so an option missing here is refused as unknown.
    options = set(re.findall(r"^  (--[a-z-]+)", out, re.M))
    assert options, out
    assert "-h, --help" in out


def test_an_option_that_is_not_in_the_help_is_refused(understudy):
    result = run_understudy(["token", "--secret", "s", "--no-such-option"], timeout=30)
    assert result.returncode == 2 and "unknown option --no-such-option" in result.stderr


def test_bash_completion_knows_commands_and_options(understudy, tmp_path):
    result = run_understudy(["completion", "bash"], timeout=30)
    assert result.returncode == 0, result
    script = tmp_path / "understudy.bash"
    script.write_text(result.stdout)
    probe = subprocess.run(
        ["bash", "-c", f'source "{script}"; COMP_WORDS=(understudy join --rec); COMP_CWORD=2; _understudy; '
                       'printf "%s\\n" "${COMPREPLY[@]}"'],
        capture_output=True, text=True, timeout=30)
    assert probe.returncode == 0, probe.stderr
    assert set(probe.stdout.split()) == {"--record", "--record-format", "--reconnect-for"}, probe.stdout
    assert run_understudy(["completion", "zsh"], timeout=30).returncode == 2
