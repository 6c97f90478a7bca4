"""The README's shell examples show what the commands really print (statuses only where curl prints one)."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"

#: A comment showing an HTTP status, e.g. ``# 202`` or ``# 202 {…}``.
STATUS_COMMENT = re.compile(r"^# [1-5]\d\d\b")


def curl_examples() -> list[tuple[str, list[str]]]:
    """``(command, the comment lines right after it)`` of every curl command in a ``sh`` block."""
    blocks = re.findall(r"```sh\n(.*?)```", README.read_text(), re.DOTALL)
    examples = []
    for block in blocks:
        lines = block.splitlines()
        i = 0
        while i < len(lines):
            if lines[i].startswith("curl "):
                command = [lines[i]]
                while command[-1].endswith("\\"):
                    i += 1
                    command.append(lines[i])
                comments = []
                while i + 1 < len(lines) and lines[i + 1].startswith("#"):
                    i += 1
                    comments.append(lines[i])
                examples.append((" ".join(command), comments))
            i += 1
    return examples


def test_the_readme_has_curl_examples() -> None:
    assert len(curl_examples()) >= 3


def test_a_status_is_shown_only_after_a_curl_that_prints_it() -> None:
    for command, comments in curl_examples():
        prints_status = " -i" in command or " -w " in command
        if any(STATUS_COMMENT.match(line) for line in comments):
            assert prints_status, f"shows a status that `{command[:60]}…` does not print"


def test_a_curl_that_prints_its_status_shows_it_last() -> None:
    for command, comments in curl_examples():
        if "-w '%{http_code}\\n'" in command and comments:
            assert STATUS_COMMENT.match(comments[-1]), f"`{command[:60]}…` prints its status last"
