"""Parse one release body (Markdown) into bug-fix entries with a real Markdown parser.

A fix section opens at a heading that matches one of the configured patterns ("Bug Fixes" at any
level, PyTorch's patch-release "Critical Fixes" ...) and closes at the next heading of the same or a
higher level. Inside it, bullets are entries and the nearest sub-heading is their area; a release
that writes its fixes as headings (v1.5.1) has heading entries, recognised because they cite a
reference or are not followed by a list. Code blocks and HTML outside bullets never produce
entries; a bullet written in HTML (``<p>``, ``<div>``, ``<details>``) is read for its text and links.
"""
import hashlib
import re
from dataclasses import dataclass, field

from markdown_it import MarkdownIt

DEFAULT_SECTION_PATTERNS = (
    r"\bbug\s*-?\s*fix(es)?\b",
    r"^critical fixes$",
    r"^crashes and error fixes$",
    r"^other fixes$",
)

_PULL_HREF = re.compile(r"github\.com/[^/\s]+/[^/\s]+/pull/(\d+)")
_BARE_REFS = re.compile(r"\((#\d+(?:\s*,\s*#\d+)*)\)")


@dataclass
class Entry:
    release: str
    section: str
    area: str
    text: str
    prs: list = field(default_factory=list)
    url: str = ""
    kind: str = "bullet"  # bullet, nested (a fix inside a grouping bullet) or heading
    id: str = ""
    subarea: str = ""  # the grouping bullet's text, for nested entries


def _inline_text(inline):
    parts = []
    for child in inline.children or ():
        if child.type in ("text", "html_inline"):
            parts.append(child.content)
        elif child.type == "code_inline":
            parts.append(f"`{child.content}`")
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
    return re.sub(r"\s+", " ", "".join(parts)).strip()


def _inline_refs(inline):
    """PR numbers and their URLs, in order of appearance, without duplicates.

    Link targets decide (a link's text may differ from its target); issue links are not PRs; bare
    ``(#N)`` counts only in text outside links, since ``[#N](.../issues/N)`` renders as ``(#N)``.
    """
    refs, urls, in_link = [], {}, 0
    for child in inline.children or ():
        if child.type == "link_open":
            in_link += 1
            match = _PULL_HREF.search(child.attrGet("href") or "")
            if match:
                number = int(match.group(1))
                if number not in refs:
                    refs.append(number)
                    urls[number] = child.attrGet("href")
        elif child.type == "link_close":
            in_link -= 1
        elif child.type == "text" and not in_link:
            for group in _BARE_REFS.findall(child.content):
                for number in (int(n) for n in re.findall(r"\d+", group)):
                    if number not in refs:
                        refs.append(number)
    return refs, urls, any(c.type == "link_open" for c in inline.children or ())


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def _blocks(body):
    """The body cut before each ATX heading that starts a line, outside fenced code, HTML blocks
    and HTML comments. A heading ends any list or paragraph, so each block parses as it would in
    place; where in doubt, no cut is made (it only costs memory)."""
    block, fence, comment, html, raw_end = [], None, False, False, None
    for line in body.splitlines(keepends=True):
        if fence is None and not comment and not html and raw_end is None \
                and line.startswith("#") and block \
                and re.match(r"#{1,6}(\s|$)", line):
            yield "".join(block)
            block = []
        block.append(line)
        match = _FENCE.match(line)
        raw = re.match(r" {0,3}<(pre|script|style|textarea)[\s>]", line, re.IGNORECASE)
        if raw_end is not None:
            raw_end = None if raw_end in line.lower() else raw_end
        elif raw and f"</{raw.group(1).lower()}>" not in line.lower():
            raw_end = f"</{raw.group(1).lower()}>"  # raw HTML runs to its closing tag
        elif comment:
            comment = "-->" not in line
        elif fence is not None:
            if match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence):
                fence = None
        elif match:
            fence = match.group(1)
        elif "<!--" in line and "-->" not in line.split("<!--", 1)[1]:
            comment = True
        elif html:
            html = bool(line.strip())  # an HTML block ends at a blank line
        elif line.lstrip(" ").startswith("<"):
            html = True
    if block:
        yield "".join(block)


def _item_tree(tokens, start):
    """The list item opening at ``start``: its own inline tokens and its sub-items (a tree), and
    the index after it."""
    item, i = {"inlines": [], "children": []}, start + 1
    while i < len(tokens):
        tok = tokens[i]
        if tok.type == "list_item_open":
            child, i = _item_tree(tokens, i)
            item["children"].append(child)
            continue
        if tok.type == "list_item_close":
            return item, i + 1
        if tok.type == "inline":
            item["inlines"].append(tok)
        elif tok.type == "html_block":  # a bullet written in HTML (<p>, <div>, <details>)
            inline = _html_inline(tok.content)
            if inline is not None:
                item["inlines"].append(inline)
        i += 1
    return item, i


def _html_inline(html):
    """The text of an HTML block inside a bullet as one inline token (links kept as links, so
    their PRs count); None for a comment or a block with no text."""
    html = re.sub(r"(?s)<!--.*?-->", " ", html)
    html = re.sub(r'(?is)<a\s[^>]*href="([^"]*)"[^>]*>(.*?)</a>', r"[\2](\1)", html)
    text = re.sub(r"\s+", " ", re.sub(r"(?s)<[^>]+>", " ", html)).strip()
    if not text:
        return None
    return next(t for t in MarkdownIt("commonmark").parse(text) if t.type == "inline")


def _all_inlines(item):
    return item["inlines"] + [x for child in item["children"] for x in _all_inlines(child)]


def _cites(item):
    """Whether an item or any of its sub-items cites a PR."""
    return any(_inline_refs(x)[0] for x in _all_inlines(item))


class NotesParser:
    def __init__(self, section_patterns=DEFAULT_SECTION_PATTERNS, repo="pytorch/pytorch"):
        self.patterns = [re.compile(p, re.IGNORECASE) for p in section_patterns]
        self.repo = repo
        self.md = MarkdownIt("commonmark")

    def is_fix_heading(self, text):
        text = text.strip().strip("*_ ").strip()
        return any(p.search(text) for p in self.patterns)

    def parse(self, body, release, release_url=""):
        """The fix entries of one release body. The body is parsed a heading's block at a time
        (``_blocks``), so memory follows the largest block, not the whole release."""
        entries = []
        fix_level = None  # heading level of the open fix section
        section = area = ""
        in_heading_entry = False  # bullets under a heading entry describe it
        for block in _blocks(body or ""):
            tokens = self.md.parse(block)
            list_depth = 0
            i = 0
            while i < len(tokens):
                tok = tokens[i]
                if tok.type == "heading_open":
                    level = int(tok.tag[1])
                    inline = tokens[i + 1]
                    text = _inline_text(inline)
                    following = tokens[i + 3].type if i + 3 < len(tokens) else None
                    if fix_level is not None and level <= fix_level and not self.is_fix_heading(text):
                        fix_level = None
                    if self.is_fix_heading(text):
                        if fix_level is None or level <= fix_level:
                            fix_level, section = level, text
                        area, in_heading_entry = text, False
                    elif fix_level is not None:
                        refs, _, has_link = _inline_refs(inline)
                        if refs or has_link or following not in ("bullet_list_open",
                                                                 "ordered_list_open"):
                            entries.append(self._entry(release, section, area, inline, "heading",
                                                       release_url))
                            in_heading_entry = True
                        else:
                            area, in_heading_entry = text, False
                    i += 3
                    continue
                if tok.type in ("bullet_list_open", "ordered_list_open"):
                    list_depth += 1
                elif tok.type in ("bullet_list_close", "ordered_list_close"):
                    list_depth -= 1
                elif (tok.type == "list_item_open" and list_depth == 1 and fix_level is not None
                      and not in_heading_entry):
                    item, i = _item_tree(tokens, i)
                    entries.extend(self._item_entries(item, release, section, area, "", release_url))
                    continue
                i += 1
        return entries

    def _item_entries(self, item, release, section, area, subarea, release_url, kind="bullet"):
        """Entries of one list item. A bullet whose sub-bullets cite PRs of their own groups
        separate fixes: each sub-bullet is an entry, with the group's text as its sub-area, and
        the group is an entry too when it cites a PR itself. Otherwise the sub-bullets describe
        the bullet and are part of its one entry."""
        if not any(_cites(child) for child in item["children"]):
            inlines = _all_inlines(item)
            return [self._entry(release, section, area, inlines, kind, release_url, subarea)] \
                if inlines else []
        out = []
        if any(_inline_refs(x)[0] for x in item["inlines"]):
            out.append(self._entry(release, section, area, item["inlines"], kind, release_url,
                                   subarea))
        own = _BARE_REFS.sub("", " ".join(_inline_text(x) for x in item["inlines"])).strip()
        context = " / ".join(t for t in (subarea, own) if t)
        for child in item["children"]:
            out.extend(self._item_entries(child, release, section, area, context, release_url,
                                          "nested"))
        return out

    def _entry(self, release, section, area, inlines, kind, release_url, subarea=""):
        if not isinstance(inlines, list):
            inlines = [inlines]
        text = " ".join(t for t in (_inline_text(x) for x in inlines) if t)
        prs, urls = [], {}
        for inline in inlines:
            refs, found, _ = _inline_refs(inline)
            for ref in refs:
                if ref not in prs:
                    prs.append(ref)
            for key, value in found.items():
                urls.setdefault(key, value)
        url = ""
        if prs:
            url = urls.get(prs[0]) or f"https://github.com/{self.repo}/pull/{prs[0]}"
        else:
            url = release_url
        return Entry(release=release, section=section, area=area, text=text, prs=prs, url=url,
                     kind=kind, subarea=subarea)


def text_hash_id(release, text):
    """Stable id for an entry that cites no PR: the same release and wording give the same id."""
    norm = re.sub(r"\s+", " ", text.strip().lower())
    return "h" + hashlib.sha256(f"{release}\n{norm}".encode("utf-8")).hexdigest()[:10]


def assign_ids(entries):
    """``pr<N>`` from the first PR, ``h<hash>`` without one; repeats get ``-2``, ``-3`` ..."""
    seen = {}
    for entry in entries:
        base = f"pr{entry.prs[0]}" if entry.prs else text_hash_id(entry.release, entry.text)
        seen[base] = seen.get(base, 0) + 1
        entry.id = base if seen[base] == 1 else f"{base}-{seen[base]}"
    return entries
