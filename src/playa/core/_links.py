"""A link a server asks a person to open: what to show of it, and what to warn about.

MCP's URL-mode question sends the person to a page of the server's (to sign in, to enter a
key) without the client in between. Nobody here fetches the link (no preview, no check): the
person reads it whole, with its domain on a line of its own, and consents before opening it.
The domain is shown as a person reads it (international labels decoded) and, when that
differs, as it is written; a warning names what makes a look-alike: a label that mixes
scripts (a Cyrillic ``а`` among Latin letters), punycode that does not decode, invisible
characters, a user name before the domain, a link that is not a web page.
"""

from __future__ import annotations

import encodings.idna
import unicodedata
from dataclasses import dataclass
from typing import Final
from urllib.parse import quote, unquote, urlsplit

__all__ = ["LinkCheck", "check_link"]

# Scripts that may share a label: UTS #39's "highly restrictive" sets (Latin with Han and the
# Japanese kana, with Han and Bopomofo, with Han and Hangul).
_ALLOWED_MIXES: Final = (
    frozenset({"LATIN", "CJK", "HIRAGANA", "KATAKANA"}),
    frozenset({"LATIN", "CJK", "BOPOMOFO"}),
    frozenset({"LATIN", "CJK", "HANGUL"}),
)
_WIDTHS: Final = ("FULLWIDTH", "HALFWIDTH")
_WEB: Final = ("http", "https")


@dataclass(frozen=True, slots=True)
class LinkCheck:
    """What to show of a link: the whole of it, its domain, and the warnings."""

    url: str
    """The link, whole, its invisible and control characters %-encoded so each one shows."""
    domain: str
    """The domain as a person reads it: international labels decoded (``""`` when there is none)."""
    ascii_domain: str | None
    """The domain as it is written on the wire (punycode), when it differs from ``domain``."""
    warnings: tuple[str, ...]
    web: bool
    """An http or https link: one a browser opens as a page."""

    @property
    def domain_line(self) -> str:
        """The domain on a line of its own, with its punycode form when it has one."""
        if not self.domain:
            return "Domain: none"
        written = f" (written {self.ascii_domain})" if self.ascii_domain else ""
        return f"Domain: {self.domain}{written}"

    def lines(self) -> list[str]:
        """The link whole, then its domain, then each warning: one line each."""
        return [
            f"Link: {self.url}",
            self.domain_line,
            *(f"Warning: {warning}" for warning in self.warnings),
        ]


def _visible(text: str) -> str:
    """``text`` with every control, format (bidi, zero-width) and space character %-encoded."""
    return "".join(quote(char, safe="") if unicodedata.category(char)[0] in "CZ" else char for char in text)


def _script(char: str) -> str | None:
    """The script of a letter, by its Unicode name's first word; None for a digit, hyphen or mark."""
    if not char.isalpha():
        return None
    words = unicodedata.name(char, "UNKNOWN").replace("-", " ").split()
    if words[0] in _WIDTHS and len(words) > 1:
        return words[1]
    return words[0]


def _mixed(label: str) -> list[str]:
    """The scripts a label mixes when they are no allowed mix; empty when it has one script."""
    scripts = {script for char in label if (script := _script(char)) is not None}
    if len(scripts) < 2 or any(scripts <= allowed for allowed in _ALLOWED_MIXES):
        return []
    return sorted(scripts)


def _label(label: str, warnings: list[str]) -> tuple[str, str]:
    """The label as read and as written; a warning when it cannot be one or the other."""
    if label.startswith("xn--"):
        try:
            return encodings.idna.ToUnicode(label), label
        except (UnicodeError, ValueError, IndexError):
            warnings.append(f"'{label}' is punycode that does not decode to a name: it imitates one.")
            return label, label
    if label.isascii():
        return label, label
    try:
        return label, encodings.idna.ToASCII(label).decode("ascii")
    except (UnicodeError, ValueError):
        warnings.append(f"'{_visible(label)}' is no valid international name.")
        return label, label


def check_link(url: str) -> LinkCheck:
    """What to show of ``url`` and what to warn about; nothing is fetched."""
    warnings: list[str] = []
    shown_url = _visible(url)
    if shown_url != url:
        warnings.append("the link holds invisible or control characters; each is shown %-encoded.")
    try:
        parts = urlsplit(url)
        if parts.scheme.lower() in _WEB:
            # As a browser reads a web link: '\' is '/' ("https://evil.example\@bank.example" opens
            # evil.example, where the split alone finds a user name before bank.example), and the
            # domain starts after any number of slashes ("https:evil.example" opens evil.example).
            head, _, rest = url.replace("\\", "/").partition(":")
            as_read = f"{head}://{rest.lstrip('/')}"
            if as_read != url:
                parts = urlsplit(as_read)
                warnings.append(
                    "the link is not written as web links are ('\\' for '/', or not two slashes after "
                    f"'{parts.scheme}:'): a browser reads it as {_visible(as_read)}, its domain the one below."
                )
        host = parts.hostname or ""
        has_user = parts.username is not None
    except ValueError:
        parts, host, has_user = urlsplit(""), "", False
        warnings.append("the link cannot be read as a URL.")
    web = parts.scheme.lower() in _WEB and bool(host)
    if not web and parts.scheme:
        warnings.append(f"this is a {parts.scheme}: link, not a web page.")
    if has_user:
        warnings.append(
            f"the link has a user name before its domain ({_visible(parts.netloc.rpartition('@')[0])}@): "
            "the site it opens is the domain below."
        )
    if "%" in host:
        # A browser decodes it before it looks the name up: judge the name it will look up.
        host = unquote(host).lower()
        warnings.append("the domain is %-encoded; decoded, it is the one below.")
    read: list[str] = []
    written: list[str] = []
    # Split as IDNA splits: the ideographic and fullwidth full stops separate labels too.
    for label in encodings.idna.dots.split(host.rstrip(".\u3002\uff0e\uff61")) if host else []:
        unicode_label, ascii_label = _label(label, warnings)
        read.append(unicode_label)
        written.append(ascii_label)
        if scripts := _mixed(unicode_label):
            warnings.append(
                f"'{_visible(unicode_label)}' mixes scripts ({', '.join(s.title() for s in scripts)}): "
                "it may imitate another name."
            )
    domain, ascii_domain = _visible(".".join(read)), _visible(".".join(written))
    return LinkCheck(
        url=shown_url,
        domain=domain,
        ascii_domain=ascii_domain if ascii_domain != domain else None,
        warnings=tuple(warnings),
        web=web,
    )
