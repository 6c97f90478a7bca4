"""What makes one blueprint's pages its own: its branding (name, logo, accent colour), who may
frame it, and its session cookie. The console and the portal each pass one ``Site`` to the kit."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import urlsplit

#: ``#rgb`` or ``#rrggbb``: the only accent colours accepted (nothing else reaches the stylesheet).
HEX_COLOUR = re.compile(r"#(?:[0-9a-fA-F]{3}){1,2}")

#: WCAG's minimum contrast for body text; links and button labels are kept at least this readable.
MIN_CONTRAST = 4.5

#: A frame-ancestors source: an origin (``https://app.example.com``, ``https://*.example.com``, a port).
ORIGIN = re.compile(r"https?://(\*\.)?[A-Za-z0-9.-]+(:\d{1,5})?")


def _channels(colour: str) -> tuple[int, int, int]:
    digits = colour[1:]
    if len(digits) == 3:
        digits = "".join(d * 2 for d in digits)
    return int(digits[0:2], 16), int(digits[2:4], 16), int(digits[4:6], 16)


def luminance(colour: str) -> float:
    """WCAG relative luminance of ``#rrggbb`` (0 black, 1 white)."""
    linear = [c / 255 / 12.92 if c / 255 <= 0.03928 else ((c / 255 + 0.055) / 1.055) ** 2.4 for c in _channels(colour)]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(first: str, second: str) -> float:
    """WCAG contrast ratio of two colours (1 to 21)."""
    lighter, darker = sorted((luminance(first), luminance(second)), reverse=True)
    return (lighter + 0.05) / (darker + 0.05)


def readable_on_white(colour: str) -> str:
    """``colour``, darkened just enough to read as text on white (links, outlines)."""
    red, green, blue = _channels(colour)
    shade = f"#{red:02x}{green:02x}{blue:02x}"
    while contrast(shade, "#ffffff") < MIN_CONTRAST:
        red, green, blue = (int(c * 0.9) for c in (red, green, blue))
        shade = f"#{red:02x}{green:02x}{blue:02x}"
    return shade


def ink_on(colour: str) -> str:
    """Black or white, whichever reads better on ``colour`` (a primary button's label)."""
    return "#ffffff" if contrast("#ffffff", colour) >= contrast("#1a202c", colour) else "#1a202c"


@dataclass(frozen=True)
class Branding:
    """The product name in the header and titles, an optional logo, and the accent colour."""

    product_name: str
    logo_url: str | None = None
    accent: str = "#2b5fb3"

    def __post_init__(self) -> None:
        if not self.product_name.strip():
            raise ValueError("the product name must not be empty")
        if not HEX_COLOUR.fullmatch(self.accent):
            raise ValueError(f"the accent colour must be #rgb or #rrggbb (got {self.accent!r})")
        if self.logo_url is not None and not (
            self.logo_url.startswith("https://") or (self.logo_url.startswith("/") and not self.logo_url.startswith("//"))
        ):
            raise ValueError(f"the logo URL must be https:// or a path on this site (got {self.logo_url!r})")

    @property
    def logo_origin(self) -> str | None:
        """The origin the logo loads from, if another site (the Content-Security-Policy allows it)."""
        if not self.logo_url or self.logo_url.startswith("/"):
            return None
        parts = urlsplit(self.logo_url)
        return f"{parts.scheme}://{parts.netloc}"

    def stylesheet(self) -> str:
        """The CSS custom properties the kit's stylesheet reads: the accent and what reads on it."""
        accent = self.accent.lower()
        return (
            ":root {\n"
            f"  --accent: {accent};\n"
            f"  --accent-text: {readable_on_white(accent)};\n"
            f"  --on-accent: {ink_on(accent)};\n"
            "}\n"
        )


def frame_ancestors(text: str | None) -> tuple[str, ...]:
    """Space-separated origins allowed to frame a site (``PORTAL_FRAME_ANCESTORS``); empty: none."""
    origins = tuple((text or "").split())
    for origin in origins:
        if not ORIGIN.fullmatch(origin):
            raise ValueError(f"a frame ancestor must be an origin such as https://app.example.com (got {origin!r})")
    return origins


@dataclass(frozen=True)
class Site:
    """One blueprint's pages as the kit serves them.

    ``name`` is the blueprint's name (``console``), ``home`` the endpoint its brand links to,
    ``frame_ancestors`` the origins that may show it in a frame (none: ``'none'``), and the
    session cookie's name, lifetime and SameSite (``Lax``; a site shown in other sites' frames
    needs ``None``, and then gets a ``Secure``, ``Partitioned`` cookie).
    """

    name: str
    branding: Branding
    home: str
    #: The site's base template (it extends ``pages/layout.html``); the kit's pages extend it.
    layout: str
    frame_ancestors: tuple[str, ...] = ()
    session_lifetime: timedelta = timedelta(hours=12)
    cookie_samesite: str = "Lax"

    @property
    def cookie_name(self) -> str:
        return f"{self.name}_session"
