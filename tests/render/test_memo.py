"""Planning a digest renders each entry once per position (`remembering_entries`)."""

from __future__ import annotations

from typing import Any

from tests.render.samples import make_channel, make_event
from tidings.core.model import Channel
from tidings.render import Flavour, Renderer, remembering_entries


class CountingRenderer(Renderer):
    def __init__(self) -> None:
        super().__init__()
        self.rendered: list[str] = []

    def _render(self, flavour: Flavour, channel: Channel, name: str, variables: Any) -> str:
        self.rendered.append(name)
        return super()._render(flavour, channel, name, variables)


def test_entries_at_the_same_index_render_once_inside_the_block() -> None:
    events = [make_event(id=i, title=f"event {i}") for i in range(1, 6)]
    channel = make_channel()
    plain = Renderer()
    expected = [plain.digest(Flavour.WECOM_MARKDOWN, channel, events[:n]) for n in (3, 5)]

    counting = CountingRenderer()
    with remembering_entries():
        got = [counting.digest(Flavour.WECOM_MARKDOWN, channel, events[:n]) for n in (3, 5)]
    assert got == expected
    assert counting.rendered.count("digest_entry") == 5  # 3, then only the 2 new ones

    counting.rendered.clear()
    [counting.digest(Flavour.WECOM_MARKDOWN, channel, events[:n]) for n in (3, 5)]
    assert counting.rendered.count("digest_entry") == 8  # outside the block: no memory


def test_the_memory_ends_with_the_block_and_tells_channels_apart() -> None:
    event = make_event(id=1, title="same event")
    first, second = make_channel(id=1, name="first"), make_channel(id=2, name="second")
    renderer = Renderer()
    with remembering_entries():
        one = renderer.digest(Flavour.WECOM_MARKDOWN, first, [event])
        two = renderer.digest(Flavour.WECOM_MARKDOWN, second, [event])
    assert one == Renderer().digest(Flavour.WECOM_MARKDOWN, first, [event])
    assert two == Renderer().digest(Flavour.WECOM_MARKDOWN, second, [event])
