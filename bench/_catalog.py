"""A big chat's tools: six servers of forty tools each, and forty searches with the tool each wants.

Used by the tool-search benchmark and its test. Descriptions follow what public MCP servers
write (a verb, its common synonyms, the thing acted on, the server's domain); the searches are
worded the way a model words ``search_tools`` queries: a few words, not always the tool's own.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from playa.core import ToolResult

__all__ = ["QUERIES", "SERVERS", "CatalogCallable", "CatalogTool", "catalog"]

_VERBS = {
    "list": "List, search or find {many} {where}, with filters and paging.",
    "get": "Get one {one} {where} by its id, with all its details.",
    "create": "Create (add, open, new) a {one} {where}.",
    "update": "Update (edit, change, rename) a {one} {where}.",
    "delete": "Delete (remove, cancel) a {one} {where}; this cannot be undone.",
}

# server: (where, [(entity, plural, what it is)])
SERVERS: dict[str, tuple[str, list[tuple[str, str, str]]]] = {
    "github": (
        "in a GitHub repository",
        [
            ("issue", "issues", "issue (bug report or task)"),
            ("pull_request", "pull requests", "pull request (PR, code review)"),
            ("branch", "branches", "git branch"),
            ("release", "releases", "release (version tag with notes)"),
            ("label", "labels", "issue label"),
            ("milestone", "milestones", "milestone"),
            ("webhook", "webhooks", "webhook"),
            ("gist", "gists", "gist (code snippet)"),
        ],
    ),
    "calendar": (
        "in the user's calendar",
        [
            ("event", "events", "calendar event (meeting, appointment)"),
            ("calendar", "calendars", "calendar"),
            ("reminder", "reminders", "reminder"),
            ("attendee", "attendees", "event attendee (guest, invitee)"),
            ("room", "rooms", "meeting room booking"),
            ("availability", "availabilities", "free/busy availability slot"),
            ("recurrence", "recurrences", "recurring event rule"),
            ("timezone", "timezones", "calendar timezone setting"),
        ],
    ),
    "drive": (
        "in cloud drive storage",
        [
            ("file", "files", "file (document, upload)"),
            ("folder", "folders", "folder (directory)"),
            ("permission", "permissions", "sharing permission"),
            ("comment", "comments", "comment on a document"),
            ("revision", "revisions", "file revision (version history)"),
            ("shortcut", "shortcuts", "shortcut link to a file"),
            ("shared_drive", "shared drives", "shared team drive"),
            ("trash", "trashed items", "trashed item"),
        ],
    ),
    "crm": (
        "in the sales CRM",
        [
            ("contact", "contacts", "contact (person, lead)"),
            ("company", "companies", "company account"),
            ("deal", "deals", "deal (sales opportunity)"),
            ("note", "notes", "note on a record"),
            ("task", "tasks", "follow-up task"),
            ("pipeline", "pipelines", "sales pipeline"),
            ("quote", "quotes", "price quote"),
            ("ticket", "tickets", "support ticket"),
        ],
    ),
    "shop": (
        "in the online store",
        [
            ("product", "products", "product (item for sale)"),
            ("order", "orders", "customer order (purchase)"),
            ("customer", "customers", "customer account"),
            ("discount", "discounts", "discount code (coupon)"),
            ("inventory", "inventory levels", "inventory stock level"),
            ("refund", "refunds", "refund (money back)"),
            ("shipment", "shipments", "shipment (delivery, tracking)"),
            ("collection", "collections", "product collection (category)"),
        ],
    ),
    "mail": (
        "in the email mailbox",
        [
            ("message", "messages", "email message"),
            ("draft", "drafts", "draft email"),
            ("thread", "threads", "email thread (conversation)"),
            ("mailbox_label", "mailbox labels", "mailbox label (tag)"),
            ("filter", "filters", "inbox filter rule"),
            ("signature", "signatures", "email signature"),
            ("auto_reply", "auto replies", "vacation auto-reply"),
            ("attachment", "attachments", "email attachment"),
        ],
    ),
}


@dataclass(frozen=True)
class CatalogTool:
    name: str
    description: str
    parameters: dict[str, Any]


def catalog() -> list[CatalogTool]:
    """The 240 tools, named ``<server>__<verb>_<entity>``."""
    tools: list[CatalogTool] = []
    for server, (where, entities) in SERVERS.items():
        for entity, plural, what in entities:
            for verb, template in _VERBS.items():
                properties: dict[str, Any] = {
                    "id": {"type": "string", "description": f"the {what}'s id"},
                    "fields": {"type": "object", "description": f"the {what}'s fields to set"},
                    "query": {"type": "string", "description": "words to filter by"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 100},
                }
                tools.append(
                    CatalogTool(
                        name=f"{server}__{verb}_{entity}",
                        description=template.format(one=what, many=plural, where=where),
                        parameters={"type": "object", "properties": properties},
                    )
                )
    return tools


QUERIES: list[tuple[str, str]] = [
    ("open a new github issue", "github__create_issue"),
    ("list pull requests", "github__list_pull_request"),
    ("delete git branch", "github__delete_branch"),
    ("publish a release with notes", "github__create_release"),
    ("rename an issue label", "github__update_label"),
    ("close milestone", "github__delete_milestone"),
    ("read one gist code snippet", "github__get_gist"),
    ("change webhook", "github__update_webhook"),
    ("schedule a meeting", "calendar__create_event"),
    ("cancel appointment", "calendar__delete_event"),
    ("add a reminder", "calendar__create_reminder"),
    ("invite a guest to the meeting", "calendar__create_attendee"),
    ("book a meeting room", "calendar__create_room"),
    ("find free busy slots", "calendar__list_availability"),
    ("edit recurring event rule", "calendar__update_recurrence"),
    ("change calendar timezone", "calendar__update_timezone"),
    ("upload a file to the drive", "drive__create_file"),
    ("make a new folder", "drive__create_folder"),
    ("share a document with a colleague: add sharing permission", "drive__create_permission"),
    ("comment on a document", "drive__create_comment"),
    ("version history of a file", "drive__list_revision"),
    ("empty the trash", "drive__delete_trash"),
    ("find contacts", "crm__list_contact"),
    ("add a company account to the crm", "crm__create_company"),
    ("update a sales deal", "crm__update_deal"),
    ("write a note on the contact record", "crm__create_note"),
    ("create follow-up task", "crm__create_task"),
    ("send a price quote", "crm__create_quote"),
    ("search products in the store", "shop__list_product"),
    ("look up one customer order", "shop__get_order"),
    ("create a discount coupon code", "shop__create_discount"),
    ("change stock inventory level", "shop__update_inventory"),
    ("refund money to a customer", "shop__create_refund"),
    ("track a shipment delivery", "shop__get_shipment"),
    ("search email messages in the inbox", "mail__list_message"),
    ("write a draft email", "mail__create_draft"),
    ("read the email thread conversation", "mail__get_thread"),
    ("create an inbox filter rule", "mail__create_filter"),
    ("change my email signature", "mail__update_signature"),
    ("turn on vacation auto-reply", "mail__create_auto_reply"),
]


@dataclass
class CatalogCallable:
    """One catalogue tool in a chat's registry; it records its calls."""

    spec: CatalogTool
    calls: list[dict[str, Any]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def description(self) -> str:
        return self.spec.description

    @property
    def parameters(self) -> Mapping[str, Any]:
        return self.spec.parameters

    async def call(self, arguments: dict[str, Any]) -> ToolResult:
        self.calls.append(arguments)
        return ToolResult(f"{self.name} done with {json.dumps(arguments)}")
