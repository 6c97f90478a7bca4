"""Specification of ``webhooks.sealing``: secrets sealed under SECRETS_KEY, opened by any of its keys,
and nothing secret in an error."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from webhooks import sealing
from webhooks.config import Settings
from webhooks.sealing import Keyring, SealError, key_id, new_key

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def test_a_sealed_secret_names_its_key_hides_the_secret_and_opens_again() -> None:
    key = new_key()
    ring = Keyring([key])
    sealed = ring.seal(SECRET)
    assert sealed.startswith(f"sealed:{key_id(key)}:")
    assert SECRET not in sealed and SECRET.removeprefix("whsec_") not in sealed
    assert ring.open(sealed) == SECRET
    assert ring.seal(SECRET) != sealed  # a fresh IV each time: equal secrets do not look equal


def test_the_first_key_seals_and_every_key_opens() -> None:
    old, new = new_key(), new_key()
    under_old = Keyring([old]).seal(SECRET)
    rotating = Keyring([new, old])
    assert rotating.open(under_old) == SECRET
    assert rotating.seal(SECRET).startswith(f"sealed:{key_id(new)}:")
    assert (rotating.is_current(under_old), rotating.is_current(rotating.seal(SECRET))) == (False, True)


def test_a_secret_under_a_key_not_held_is_refused_naming_key_ids_only() -> None:
    old, new = new_key(), new_key()
    sealed = Keyring([old]).seal(SECRET)
    with pytest.raises(SealError) as error:
        Keyring([new]).open(sealed)
    assert key_id(old) in str(error.value) and key_id(new) in str(error.value)
    assert old not in str(error.value) and new not in str(error.value) and SECRET not in str(error.value)


def test_an_altered_sealed_value_is_refused() -> None:
    ring = Keyring([new_key()])
    sealed = ring.seal(SECRET)
    altered = sealed[:-8] + ("A" if sealed[-8] != "A" else "B") + sealed[-7:]
    with pytest.raises(SealError, match="altered"):
        ring.open(altered)


def test_a_value_stored_before_sealing_reads_as_itself() -> None:
    assert Keyring([new_key()]).open(SECRET) == SECRET


def test_a_malformed_secrets_key_stops_the_settings_without_repeating_it() -> None:
    good = new_key()
    with pytest.raises(ValueError) as error:
        Settings.from_env(env={"SECRETS_KEY": f"{good},not-a-key-hunter2"})
    assert "SECRETS_KEY's key 2 is not valid" in str(error.value)
    assert "hunter2" not in str(error.value) and good not in str(error.value)
    assert Settings.from_env(env={"SECRETS_KEY": f" {good} , {new_key()} "}).secrets_key is not None


def test_the_settings_never_show_the_key() -> None:
    key = new_key()
    assert key not in repr(Settings.from_env(env={"SECRETS_KEY": key}))


def test_without_secrets_key_one_key_is_generated_into_the_instance_directory_once(tmp_path: Path) -> None:
    try:
        first = sealing.configure(None, tmp_path)
        second = sealing.configure(None, tmp_path)
        path = tmp_path / sealing.KEY_FILE
        assert first.ids == second.ids == [key_id(path.read_text())]
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    finally:
        from tests.conftest import TEST_SECRETS_KEY

        sealing.configure(TEST_SECRETS_KEY)
