"""The README and every ``docs/`` page say what the service does: commands that run as shown.

Each page is checked alike: curl examples show a status only where curl prints one; every
``flask`` command names real commands, options and arguments; every ``python`` command names
a script or module that exists, with options it accepts; every setting is read by the code,
with the default the page states; every metric exists; the Procfile table is the Procfile;
every link and anchor resolves; and the receiver the pages show verifies a signed request.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import click
import httpx
import pytest
from flask import Flask

from webhooks.config import Settings
from webhooks.delivery.signing import sign

from tests.receivers import unused_port

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
#: Every page a reader is pointed to: the README and each ``docs/`` page.
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
#: The benchmark's pages: their links are checked too, and the commands of its README (its results are
#: history: they name commands as they were then).
BENCH_PAGES = sorted((ROOT / "bench").glob("*.md"))
LINKED_PAGES = [*PAGES, *BENCH_PAGES]
COMMAND_PAGES = [*PAGES, ROOT / "bench" / "README.md"]
OPERATING = ROOT / "docs" / "operating.md"

#: A comment showing an HTTP status, e.g. ``# 202`` or ``# 202 {…}``.
STATUS_COMMENT = re.compile(r"^# [1-5]\d\d\b")
#: An environment variable as the pages write one: ``NAME`` in capitals with an underscore.
SETTING = re.compile(r"`([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)(?:=[^`]*)?`")
#: Names in capitals the pages mention that are not the service's settings.
NOT_SETTINGS = {
    "WEBHOOK_SECRET": "the example receiver's own variable (its endpoint's secret)",
    "TEST_DATABASE": "the test suite's pass (tests/conftest.py), for developers",
}


def page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


def without_code_blocks(text: str) -> str:
    return re.sub(r"```.*?```", "", text, flags=re.DOTALL)


def shell_lines(page: Path) -> list[str]:
    """Every command line of the page's ``sh`` blocks, continuation lines joined, comments dropped."""
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", page.read_text(), re.DOTALL):
        pending = ""
        for line in block.splitlines():
            if line.startswith("#") and not pending:
                continue
            pending += line.rstrip("\\").rstrip() + " "
            if not line.endswith("\\"):
                commands.append(pending.strip())
                pending = ""
    return [command for command in commands if command]


def curl_examples(page: Path) -> list[tuple[str, list[str]]]:
    """``(command, the comment lines right after it)`` of every curl command in a ``sh`` block."""
    examples = []
    for block in re.findall(r"```sh\n(.*?)```", page.read_text(), re.DOTALL):
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


def test_the_pages_show_curl_examples() -> None:
    for name in ("README.md", "docs/customers.md", "docs/services.md", "docs/support.md"):
        assert len(curl_examples(ROOT / name)) >= 2, name


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_a_status_is_shown_only_after_a_curl_that_prints_it(page: Path) -> None:
    for command, comments in curl_examples(page):
        prints_status = " -i" in command or " -w " in command
        if any(STATUS_COMMENT.match(line) for line in comments):
            assert prints_status, f"shows a status that `{command[:60]}…` does not print"


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_a_curl_that_prints_its_status_shows_it_last(page: Path) -> None:
    for command, comments in curl_examples(page):
        if "-w '%{http_code}\\n'" in command and comments:
            assert STATUS_COMMENT.match(comments[-1]), f"`{command[:60]}…` prints its status last"


# --- commands -----------------------------------------------------------------------------


def commands_of(program: str) -> list[str]:
    """Every use of ``program`` the pages show, in ``sh`` blocks and inline code, from ``program`` on.

    Inline ``a|b|c`` alternatives become one command each; ``[--option X]`` brackets are dropped.
    """
    found = []
    for page in COMMAND_PAGES:
        texts = shell_lines(page) + re.findall(r"`([^`\n]+)`", without_code_blocks(page.read_text()))
        for text in texts:
            for part in re.split(r"\s*(?:&&|\|(?=\s))\s*", text):
                part = part.split(" # ")[0].strip()
                if part.startswith(program + " "):
                    found.extend(alternatives(part.replace("[", "").replace("]", "")))
    return sorted(set(found))


def alternatives(command: str) -> list[str]:
    """``tenant add-key|revoke-key X`` → ``tenant add-key X`` and ``tenant revoke-key X``."""
    words = command.split()
    for i, word in enumerate(words):
        if "|" in word and not word.startswith("-") and "-" in word:
            return [" ".join([*words[:i], choice, *words[i + 1:]]) for choice in word.split("|")]
    return [command]


def flask_words(command: str) -> list[str]:
    words = shlex.split(command.replace("…", "x"))[1:]
    if words[:2] == ["--app", "app"]:
        words = words[2:]
    return words


def resolve(app: Flask, words: list[str]) -> tuple[click.Command, list[str]]:
    """The click command ``words`` name, and the words left for it."""
    command: click.Command = app.cli
    while isinstance(command, click.Group) and words and not words[0].startswith("-"):
        sub = command.get_command(click.Context(command), words[0])
        assert sub is not None, f"no command {words[0]!r}"
        command, words = sub, words[1:]
    return command, words


def test_every_flask_command_the_pages_show_exists_with_its_options_and_arguments(app: Flask) -> None:
    commands = commands_of("flask")
    assert any("tenant create" in command for command in commands) and len(commands) >= 10
    for command in commands:
        target, rest = resolve(app, flask_words(command))
        assert not isinstance(target, click.Group), f"`{command}` names a group, not a command"
        options = {name for param in target.params if isinstance(param, click.Option) for name in param.opts}
        mentioned = {word.split("=")[0] for word in rest if word.startswith("--")}
        assert mentioned <= options, f"`{command}`: no option {sorted(mentioned - options)}"
        if len(rest) > 1 or not all(word.startswith("--") for word in rest):  # a usage line, not a bare name
            ctx = click.Context(target, info_name=target.name)
            values, extra, _ = target.make_parser(ctx).parse_args(args=list(rest))
            assert not extra, f"`{command}`: unexpected arguments {extra}"
            for param in target.params:
                if isinstance(param, click.Argument) and param.required and len(rest) > len(mentioned):
                    assert values.get(param.name) is not None, f"`{command}` lacks {param.human_readable_name}"


def script_options(path: Path) -> set[str]:
    """Every string constant of a script (its option names and sub-commands among them)."""
    return {
        node.value for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }


def test_every_python_command_the_pages_show_names_a_script_or_module_that_takes_its_options() -> None:
    commands = [command for command in commands_of("python") if not command.startswith("python receiver.py")]
    assert any("bench/" in command for command in commands)
    for command in commands:
        words = shlex.split(command)[1:]
        if words[0] == "-m":
            assert importlib.util.find_spec(words[1]) is not None, f"`{command}`: no module {words[1]}"
            continue
        script = ROOT / words[0]
        assert script.is_file(), f"`{command}`: no file {words[0]}"
        if words[0] == "bench/run.py":
            accepts_options(command, words[1:])
            continue
        known = script_options(script)
        for word in words[1:]:
            if word.startswith("--"):
                assert word.split("=")[0] in known, f"`{command}`: {script.name} takes no {word}"
            elif word.isidentifier() and word.islower():
                assert word in known, f"`{command}`: {script.name} has no command {word}"


def accepts_options(command: str, words: list[str]) -> None:
    """``bench/run.py`` parses ``words`` (its ``--help`` included), every step ``--only`` names existing."""
    from bench.run import parse_args

    try:
        parse_args(words)
    except SystemExit as exit:
        assert exit.code == 0 and "--help" in words, f"`{command}`: bench/run.py refuses its options"


def test_the_procfile_table_is_the_procfile() -> None:
    procfile = dict(line.split(": ", 1) for line in (ROOT / "Procfile").read_text().splitlines() if line.strip())
    section = OPERATING.read_text().split("## Processes", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \| `([^|]+)` \|", section, re.MULTILINE)

    assert dict(rows) == procfile


# --- settings and metrics -----------------------------------------------------------------


def code_reads() -> dict[str, object]:
    """Every environment variable the code reads with ``….get("NAME", default)``: name → default.

    The default is the literal the code falls back to, or ``Settings`` when
    ``Settings.from_env`` reads it (its default is the dataclass's).
    """
    reads: dict[str, object] = {}
    for path in [*sorted((ROOT / "webhooks").rglob("*.py")), ROOT / "app.py"]:
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                    and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
                    and re.fullmatch(r"[A-Z][A-Z0-9_]+", node.args[0].value)):
                default = node.args[1] if len(node.args) > 1 else None
                in_settings = path.name == "config.py"
                reads[node.args[0].value] = (
                    Settings if in_settings else default.value if isinstance(default, ast.Constant) else None
                )
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and any(
                isinstance(target, ast.Name) and target.id.endswith("_ENV") for target in node.targets
            ):
                reads[node.value.value] = None  # a name kept in a constant, read with os.environ.get(CONSTANT)
    return reads


def configuration_table() -> dict[str, str]:
    """The operating page's configuration table: variable → its default cell."""
    section = OPERATING.read_text().split("## Configuration (environment)", 1)[1].split("\n## ", 1)[0]
    return dict(re.findall(r"^\| `([A-Z][A-Z0-9_]+)` \| ([^|]+?) \|", section, re.MULTILINE))


def test_every_setting_the_pages_name_is_read_by_the_code_and_in_the_configuration_table() -> None:
    reads, table = code_reads(), configuration_table()
    named = {name for page in PAGES for name in SETTING.findall(page.read_text())} - NOT_SETTINGS.keys()
    listen_variables = {name for name in named if name.startswith("WEBHOOKS_")}  # flask listen's options

    assert "OFFLINE_AFTER_FAILURES" in named
    assert sorted(name for name in named if name not in reads and name not in script_options(
        ROOT / "webhooks" / "listen.py")) == []
    assert sorted(named - listen_variables - table.keys()) == []
    assert sorted(table.keys() - reads.keys()) == []


def test_every_setting_the_configuration_reads_is_documented() -> None:
    reads, table = code_reads(), configuration_table()
    from_env = {name for name, default in reads.items() if default is Settings}

    assert len(from_env) >= 20
    assert sorted(from_env - table.keys()) == []


def test_each_documented_default_is_the_codes() -> None:
    reads = code_reads()
    checked = 0
    for name, cell in configuration_table().items():
        literal = re.fullmatch(r"`([^`]*)`", cell.strip())
        if not literal:
            continue  # "unset (…)", "generated once …": said in words
        if reads[name] is Settings:
            assert Settings.from_env({name: literal.group(1)}) == Settings.from_env({}), name
        else:
            assert reads[name] == literal.group(1), f"{name}: the code's default is {reads[name]!r}"
        checked += 1
    assert checked >= 25


def test_every_metric_in_the_table_exists_and_every_metric_is_in_the_table() -> None:
    section = OPERATING.read_text().split("## Metrics", 1)[1].split("\n## ", 1)[0]
    documented = {name.removesuffix("_total") for name in re.findall(r"^\| `(webhooks_\w+)", section, re.MULTILINE)}
    defined = {name for name in script_options(ROOT / "webhooks" / "metrics.py") if re.fullmatch(r"webhooks_\w+", name)}

    assert len(defined) >= 12
    assert documented == defined


# --- links --------------------------------------------------------------------------------


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives the page's headings (``-1``, ``-2`` … for repeats)."""
    seen: dict[str, int] = {}
    result = set()
    for heading in re.findall(r"^#{1,6} (.+)$", without_code_blocks(page.read_text()), re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        result.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return result


@pytest.mark.parametrize("page", LINKED_PAGES, ids=page_id)
def test_every_link_resolves_to_a_file_and_a_heading(page: Path) -> None:
    links = re.findall(r"\]\(([^)\s]+)\)", without_code_blocks(page.read_text()))
    for link in links:
        if re.match(r"[a-z]+:", link):
            continue  # https:, mailto:
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        assert target.exists(), f"{page_id(page)} links to {link}: no such file"
        if anchor:
            assert anchor in anchors(target), f"{page_id(page)} links to {link}: no such heading"


def test_the_overview_links_to_every_page() -> None:
    linked = set(re.findall(r"\]\(docs/([\w-]+\.md)\)", README.read_text()))

    assert linked >= {page.name for page in PAGES[1:]}


# --- the receiver -------------------------------------------------------------------------


def receiver_code(page: Path) -> str:
    blocks = [block for block in re.findall(r"```python\n(.*?)```", page.read_text(), re.DOTALL) if "HTTPServer" in block]
    assert len(blocks) == 1, page_id(page)
    return blocks[0]


def test_the_receiver_the_pages_show_verifies_a_signed_request_and_refuses_a_forged_one(tmp_path: Path) -> None:
    code = receiver_code(README)
    assert receiver_code(ROOT / "docs" / "customers.md") == code
    port = unused_port()
    script = tmp_path / "receiver.py"
    script.write_text(code.replace('("127.0.0.1", 9000)', f'("127.0.0.1", {port})'))
    secret = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    receiver = subprocess.Popen([sys.executable, str(script)], env={"WEBHOOK_SECRET": secret},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        body = b'{"type": "order.created", "timestamp": "2026-11-26T10:00:00Z", "data": {"order_id": 42}}'
        now = int(time.time())
        headers = {"content-type": "application/json", "webhook-id": "evt_readme", "webhook-timestamp": str(now),
                   "webhook-signature": sign(secret, "evt_readme", now, body)}
        url = f"http://127.0.0.1:{port}/webhooks"
        deadline = time.monotonic() + 10
        while True:
            try:
                signed = httpx.post(url, content=body, headers=headers)
                break
            except httpx.ConnectError:
                assert time.monotonic() < deadline and receiver.poll() is None, receiver.stderr.read() if receiver.stderr else ""
                time.sleep(0.05)
        forged = httpx.post(url, content=body.replace(b"42", b"43"), headers=headers)

        assert (signed.status_code, forged.status_code) == (204, 400)
    finally:
        receiver.terminate()
        output, _ = receiver.communicate(timeout=10)
    assert output.startswith('verified evt_readme {"type": "order.created"')
    assert output.count("verified") == 1
