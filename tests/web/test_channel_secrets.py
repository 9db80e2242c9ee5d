"""The channel form and S2/S3: a webhook's URL token and header values shown masked, the form
sent back unchanged keeps them, a new host with the masks kept is refused, and a signing
secret rotated from the form is shown once."""

from __future__ import annotations

import re

from tests.web.conftest import Ui

TOKEN = "uiToken-0123456789"
SECRET = "whsec_" + "c2VjcmV0LXNpZ25pbmcta2V5LWZvci10ZXN0cw=="
URL = f"https://hooks.invalid/in?token={TOKEN}"
CONFIG = {"url": URL, "secret": SECRET, "headers": {"Authorization": f"Bearer {TOKEN}"}}


def _form_values(page: str) -> dict[str, str]:
    """The edit form's values as a browser would post them back (inputs and textareas)."""
    values = dict(re.findall(r'<input\b[^>]*\bname="([^"]+)"[^>]*\bvalue="([^"]*)"', page))
    for name, text in re.findall(r'<textarea\b[^>]*\bname="([^"]+)"[^>]*>([^<]*)</textarea>', page):
        values[name] = text
    for name, value in re.findall(
        r'<select\b[^>]*\bname="([^"]+)"[^>]*>.*?<option value="([^"]*)" selected', page, re.S
    ):
        values[name] = value
    # Unchecked boxes ("clear the stored secret") are not posted.
    return {k: v.replace("&amp;", "&") for k, v in values.items() if not k.startswith("clear_")}


async def test_the_edit_form_masks_secret_parts_and_keeps_them(logged_in: Ui) -> None:
    hub = logged_in.service.hub
    channel = await hub.channels.create(name="hook", kind="webhook", config=CONFIG)
    page = (await logged_in.client.get(f"/ui/channels/{channel.id}/edit")).text
    assert TOKEN not in page
    assert SECRET not in page
    values = _form_values(page)
    assert "••••" in values["url"]
    assert "Authorization: ••••" in values["headers"]
    values["name"] = "renamed"
    saved = await logged_in.post(f"/ui/channels/{channel.id}/edit", values)
    assert saved.status_code == 303, saved.text
    stored = await hub.channels.get(channel.id)
    assert (stored.name, stored.config) == ("renamed", CONFIG)

    values["url"] = values["url"].replace("hooks.invalid", "collector.invalid")
    refused = await logged_in.post(f"/ui/channels/{channel.id}/edit", values)
    assert refused.status_code == 422
    assert "re-enter the secret for the new destination" in refused.text
    assert (await hub.channels.get(channel.id)).config == CONFIG


async def test_rotate_the_signing_secret_from_the_form(logged_in: Ui) -> None:
    hub = logged_in.service.hub
    channel = await hub.channels.create(name="hook", kind="webhook", config=CONFIG)
    page = (await logged_in.client.get(f"/ui/channels/{channel.id}/edit")).text
    assert 'id="rotate-secret"' in page
    shown = await logged_in.post(f"/ui/channels/{channel.id}/rotate-secret", {"grace_s": "60"})
    assert shown.status_code == 200, shown.text
    assert shown.headers["cache-control"] == "no-store"
    stored = await hub.channels.get(channel.id)
    assert stored.config["secret"] in shown.text
    assert stored.config["previous_secret"] == SECRET
    assert SECRET not in shown.text
    again = await logged_in.post(f"/ui/channels/{channel.id}/rotate-secret", {"grace_s": "x"})
    assert again.status_code == 422
