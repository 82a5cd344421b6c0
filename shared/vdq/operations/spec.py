"""The REST contract as data: every operation, its parameters, body and answers.

One table serves three readers: the operator handler validates query strings against it
(vdq.operations.params), the OpenAPI generator (``vdq.openapi``, run at build time) writes the
document from it, and a test checks that the routes the handlers serve are exactly the
operations listed here. Pure data: importing it costs nothing at cold start.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from vdq.core import ids, resources
from vdq.core.text import CONTROL_CHARS
from vdq.intake.fields import LIST_NAME, Body, Field
from vdq.intake.messages import MAX_ORIGIN_PART
from vdq.operations import cursor
from vdq.workflow.lanes import PRIORITIES
from vdq.workflow.table import DONE_STATES, TRANSITION_GATES, TRANSITIONS, State

ACTIVE_STATES = tuple(s.value for s in State if s not in DONE_STATES)
ALL_STATES = tuple(s.value for s in State)
SENT_STATES = tuple(s.value for s in State if s in DONE_STATES)
METHODS = ("email", "sms")
# The transitions an operator may run; the others are the server's own (403 for everyone).
OPERATOR_TRANSITIONS = tuple(n for n, t in TRANSITIONS.items() if t.permission is not None)
# Counts follow the table's stream by its tumbling window and a batch's wait (vdq.schedules
# .postings): the searches by sender, provider ID and time, and the counts.
LAG_SECONDS = (resources.STREAM_TUMBLING_WINDOW_SECONDS
               + resources.STREAM_BATCHING_WINDOW_SECONDS)  # fmt: skip
PERIODS = ("hours", "days")
BREAKDOWNS = ("producer", "identity")
MAX_LIMIT = 100
DEFAULT_LIMIT = 50
MAX_RESEND_IDS = 100
MAX_QUERY_VALUE = 2048  # characters of a string query parameter
MAX_ITEM_ID = 64  # characters of an id in a resend body (an unknown one is a 404)
RESEND = Body("ResendRequest", "The done items to send again.", (
    Field("ids", "list", "Ids of done items; a repeated id is sent once.", required=True,
          max_items=MAX_RESEND_IDS, message="must be a list of 1 to {max_items} item ids",
          of=Field("", "item_id", "A queue item's id (26 characters of Crockford base32 (a "
                   "ULID)).", required=True, min_length=1, max_length=MAX_ITEM_ID,
                   message="must be an item id")),
))  # fmt: skip


# NamedTuples, not frozen dataclasses: as immutable, and about a tenth of the import work.
class Param(NamedTuple):
    name: str
    where: str  # "path" | "query" | "header"
    type: str  # "string" | "integer" | "boolean"
    description: str
    enum: tuple[str, ...] = ()
    minimum: int | None = None
    maximum: int | None = None
    default: Any = None
    required: bool = False
    pattern: str | None = None
    max_length: int | None = None
    # The pattern is a subset of what the server takes (a receiver): not enforced, documented.
    loose: bool = False


class Operation(NamedTuple):
    id: str
    method: str
    path: str  # OpenAPI form, /queue-items/{id}
    function: str  # the Lambda function that serves it: enqueue | operator | webhook
    tag: str  # the resource it belongs to, as the document groups operations
    summary: str
    description: str  # what it does, for a reader of the document
    permissions: tuple[str, ...]  # every one is needed; () for a public operation
    params: tuple[Param, ...] = ()
    body: str | None = None  # schema name of the request body
    status: int = 200
    answer: str | None = None  # schema name of the success body
    # Statuses the function answers besides success; the document adds API Gateway's (401 and
    # 403 on private operations, 413 with a body, 429, 500, 502, 504).
    errors: tuple[int, ...] = ()
    public: bool = False  # no bearer token
    idempotent: bool = False  # takes an Idempotency-Key
    media: str | None = None  # the success body's type when it is not JSON (text/html, ...)

    @property
    def rule(self) -> str:
        """The path as the operator function's router spells it (vdq.operations.router)."""
        return self.path.replace("{", "<").replace("}", ">")


_ID = Param("id", "path", "string", "The queue item's id (26 characters, Crockford base32; "
            "read in any case).", required=True, pattern=ids.PATTERN, loose=True)  # fmt: skip
_LIMIT = Param("limit", "query", "integer", "How many items one page holds at most.",
               minimum=1, maximum=MAX_LIMIT, default=DEFAULT_LIMIT)  # fmt: skip
def _cursor(where_from: str, first: str) -> Param:
    return Param("cursor", "query", "string",
                 f"Where the page starts: {where_from}, as returned. Opaque and signed: a value "
                 f"that is not of this pattern or length is a 422, one that is but was not "
                 f"signed for this request a 400, both with details.field `cursor`. Leave it "
                 f"out {first}.",
                 pattern=cursor.PATTERN, max_length=MAX_QUERY_VALUE)  # fmt: skip


_CURSOR = _cursor("the `cursor` of the previous page of the same list with the same filters",
                  "for the first page")
_HISTORY_LIMIT = Param("limit", "query", "integer", "How many entries one page holds at most.",
                      minimum=1, maximum=500, default=100)  # fmt: skip
_HISTORY_CURSOR = _cursor("the item's `history_cursor`, or the `cursor` of the previous page "
                          "of its history (signed for this item)",
                          "to start with the first entry")
_METHOD = Param("method", "query", "string", "Only items sent by this method.", enum=METHODS)
_PRIORITY = Param("priority", "query", "string", "Only items of this priority lane.",
                  enum=PRIORITIES)  # fmt: skip
_SCHEDULED = Param("scheduled", "query", "boolean",
                   "true: only items waiting for their `send_at` (queued, the time still "
                   "ahead); false: only the others. Leave it out for both.")  # fmt: skip
_DRY_RUN = Param("dry_run", "query", "boolean",
                 "Check the permission and that the item's state is a source of the "
                 "transition, and answer as if it ran, without changing anything.",
                 default=False)  # fmt: skip
_IDEMPOTENCY = "Idempotency-Key"
# Its rules (lifetime, scope, answers) are written out by the document generator.
_KEY = Param(_IDEMPOTENCY, "header", "string",
             "A key of the caller's choosing that makes the request safe to repeat.")
# An upload's key stores no answer: it makes the upload's id (vdq.intake.uploads.new_upload).
_UPLOAD_KEY = Param(_IDEMPOTENCY, "header", "string",
                    "A key of the caller's choosing that makes the upload safe to make again; "
                    "it needs the declaration's `sha256` (a 422 naming it otherwise). The same "
                    "caller, key and declaration (filename, content_type, size, sha256) always "
                    "answer the same `upload_id`, with a URL signed anew, also after an email "
                    "took the upload; S3 takes only the declared bytes for it. A client that "
                    "runs again from the start (upload, PUT, email) with the keys it used the "
                    "first time then sends the same email body, which the email's own "
                    "Idempotency-Key answers as the first time. A changed file is another "
                    "upload, and the email's key refuses the changed email. Use a key of its "
                    "own for each file, made from the email's key and the file's place (`vdq "
                    "send-email --attach-large` does). A key outside the schema's pattern and "
                    "length is a 400.")  # fmt: skip
_ADD = ("vdq.add_queueitem",)
_READ = ("vdq.read_queueitem",)
_LIST = ("vdq.list_queueitem",)
_RESEND = ("vdq.can_resend", "vdq.read_queueitem")
_SUPPRESSIONS_LIST = ("vdq.list_suppression",)
_SUPPRESSIONS_CHANGE = ("vdq.change_suppression",)
CHANNELS = ("email", "sms")
# What the document promises for a receiver: an E.164 number, or an address of the forms people
# have (first.middle.last, o'brien, a sub-sub-domain, a long or internationalised top-level
# domain). A subset of what the server takes (vdq.intake.validation.email_address): any address
# the pattern matches is accepted, and the pattern's longest is within its 254 characters.
_LABEL = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,20}[A-Za-z0-9])?"
_LOCAL_PART = "[A-Za-z0-9_+'-]{1,20}(?:\\.[A-Za-z0-9_+'-]{1,20}){0,2}"
RECEIVER_PATTERN = (r"^(?:\+(?:1[2-9][0-9]{2}[2-9][0-9]{6}|[2-9][0-9]{1,14})"
                    f"|{_LOCAL_PART}@{_LABEL}(?:\\.{_LABEL}){{0,4}}"
                    r"\.(?:[A-Za-z]{2,24}|xn--[A-Za-z0-9]{2,20}))$")
# What str.strip() removes, so what the server counts as blank (spelled out: regex engines
# disagree on \s, e.g. about U+001C..U+001F).
BLANK = "".join(f"\\u{ord(c):04x}" for c in map(chr, range(0x10000)) if c.isspace())
# A single-line field: no control characters; a required one also holds a non-space character.
SINGLE_LINE = f"^[^{CONTROL_CHARS}]*$"
SINGLE_LINE_REQUIRED = f"^[^{CONTROL_CHARS}]*[^{BLANK}{CONTROL_CHARS}][^{CONTROL_CHARS}]*$"
# A body (text, html, SMS): any character but NUL; a required one holds a non-space character.
MULTI_LINE_REQUIRED = f"^[^\\x00]*[^{BLANK}\\x00][^\\x00]*$"
MULTI_LINE = "^[^\\x00]*$"
# An SES message ID or a Twilio SID: letters, digits and a few separators, nothing else.
PROVIDER_ID_PATTERN = r"^[A-Za-z0-9._:@+=/-]+$"
# A time or a date the search always takes: every calendar day from 1980 (leap days included),
# so that every value the pattern allows is a real date after 1970 in UTC whatever its offset;
# the server also takes the days of the 1970s: documented, not enforced.
_YEAR = r"(?:19[89][0-9]|2[0-9]{3})"
_LEAP_YEAR = r"(?:19(?:8[048]|9[26])|2[0-9](?:0[48]|[2468][048]|[13579][26])|2[048]00)"
_DATE = (f"(?:{_YEAR}-(?:(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])"
         r"|(?:0[13-9]|1[0-2])-(?:29|30)|(?:0[13578]|1[02])-31)"
         f"|{_LEAP_YEAR}-02-29)")
TIME_PATTERN = (f"^{_DATE}"
                r"(?:[Tt](?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]+)?"
                r"(?:[Zz]|[+-](?:0[0-9]|1[0-3]):[0-5][0-9]))?$")
RECEIVER_TEXT = ("An email address (compared in lower case; each +label variant is an address "
                  "of its own) or an E.164 number.")
# Loose: a number stored before the North American rule is looked up and removed too.
_RECEIVER = Param("receiver", "path", "string", RECEIVER_TEXT, required=True, max_length=254,
                  pattern=RECEIVER_PATTERN, loose=True)
_TOKEN = Param("token", "path", "string",
               "The opaque token of the List-Unsubscribe URL, as the email carried it (it "
               "names the address and the list, encrypted and authenticated; a token of the "
               "form `<a>.<b>`, as emails carried them before lists, still works).",
               required=True, pattern=r"^[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)?$", max_length=600)
_LIST_PARAM = Param("list", "query", "string",
                    "Only the receiver's unsubscribe from this list; leave it out for its entry "
                    "for every email or SMS.", pattern=LIST_NAME, max_length=64)
_ENQUEUE_ERRORS = (400, 409, 422, 429, 503)
# A client id (Cognito's are 26 lower-case letters and digits) or "group:<name>".
PRODUCER_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9:._@+=-]{0,127}$"
_PRODUCER = Param("producer", "path", "string", "The producer: a client id or a user's "
                  "subject (the token's `sub`).", required=True, pattern=PRODUCER_PATTERN)
_ENQUEUE_TEXT = (
    "Validates the whole request first: nothing is stored unless all of it is valid (422 "
    "naming the field otherwise). {what} The answer lists the new items in receiver order; "
    "each goes on to be sent on its own, and its state is read with getQueueItem. With an "
    "`Idempotency-Key`, repeating the request returns the first answer and queues nothing "
    "again (see the key's description). A 503 `partially_enqueued` means some items were "
    "stored (and will be sent) before the store failed: details.accepted lists their ids and "
    "details.rejected the receivers that were not queued; send those again, not the others."
)

OPERATIONS: tuple[Operation, ...] = (
    Operation("postEmails", "POST", "/emails", "enqueue", "messages",
              "Queue an email: one item per receiver across to, cc and bcc",
              _ENQUEUE_TEXT.format(what="Each distinct address across to, cc and bcc (compared "
                                   "without case) becomes one queue item that shares the "
                                   "content; attachments are stored once."),
              _ADD, (_KEY,),
              body="EmailRequest", status=201, answer="Items", errors=_ENQUEUE_ERRORS,
              idempotent=True),
    Operation("postSms", "POST", "/sms", "enqueue", "messages",
              "Queue an SMS: one item per receiver",
              _ENQUEUE_TEXT.format(what="Each distinct cell in `to` becomes one queue item."),
              _ADD, (_KEY,),
              body="SmsRequest", status=201, answer="Items", errors=_ENQUEUE_ERRORS,
              idempotent=True),
    Operation("listQueueItems", "GET", "/queue-items", "operator", "queue-items",
              "List active (not done) items, oldest first",
              "The items not yet in a done state, oldest queued first, a page at a time. A "
              "page filtered by method, state, priority or scheduled may hold fewer items "
              "than `limit` and still carry a cursor: follow it until `cursor` is null.",
              _LIST, (_METHOD, Param("state", "query", "string",
                                     "Only items in this active state.", enum=ACTIVE_STATES),
                      _PRIORITY, _SCHEDULED, _LIMIT, _CURSOR),
              answer="ItemPage", errors=(400, 422)),
    Operation("getQueueItem", "GET", "/queue-items/{id}", "operator", "queue-items",
              "Read one item in any state, with content, attachments and history",
              "The item, the content it shares with the other receivers of its request, its "
              "attachments (with a download path each) and its history, oldest first: the first "
              "100 entries, with `history_cursor` to read the rest with getItemHistory.",
              _READ, (_ID,), answer="ItemDetail", errors=(404, 422)),
    Operation("getItemHistory", "GET", "/queue-items/{id}/history", "operator", "queue-items",
              "Read an item's history, a page at a time",
              "The item's history, oldest first, from where `cursor` says. An item's view "
              "holds the first 100 entries and, when there are more, a `history_cursor` to "
              "read on with here; follow `cursor` until it is null. Entries that arrive "
              "meanwhile come on later pages.",
              _READ, (_ID, _HISTORY_LIMIT, _HISTORY_CURSOR), answer="HistoryPage",
              errors=(400, 404, 422)),
    Operation("runTransition", "POST", "/queue-items/{id}/transitions/{name}", "operator",
              "queue-items", "Retry or cancel an item",
              "Runs an operator transition through the workflow: `retry` puts a delayed or "
              "errored item back in the queue with a new attempt (sent now, or, before its "
              "`send_at`, then); `cancel` stops a queued, "
              "delayed or errored item for good. `dry_run` checks without changing anything. "
              "409 `invalid_transition` when the item's state "
              "is no source of the transition (details.state says which it is); 409 "
              "`conflict` with details.reason `content_expired` when a retry's item has no "
              "content left to send (cancel it); 503 "
              "`contention` when others kept changing the item: try again.",
              TRANSITION_GATES,
              (_ID, Param("name", "path", "string", "The transition to run.", required=True,
                          enum=OPERATOR_TRANSITIONS), _DRY_RUN),
              answer="TransitionResult", errors=(404, 409, 422, 503)),
    Operation("listSentItems", "GET", "/sent-items", "operator", "sent-items",
              "List done items, newest first",
              "The items in a done state (succeeded, cancelled, unconfirmed), most recently "
              "done first, a page at a time. The list follows the table's stream: an item "
              f"appears up to {LAG_SECONDS} s after it is done (getQueueItem and searchItems "
              "by receiver show it at once). A page may hold fewer items than `limit` and "
              "still carry a cursor: follow it until `cursor` is null.",
              _LIST, (_METHOD, Param("state", "query", "string",
                                     "Only items in this done state.", enum=SENT_STATES),
                      _PRIORITY, _LIMIT, _CURSOR),
              answer="ItemPage", errors=(400, 422)),
    Operation("getSentItem", "GET", "/sent-items/{id}", "operator", "sent-items",
              "Read one done item, with content, attachments and history",
              "As getQueueItem, for a done item only: an item that is not done is a 404 whose "
              "details.state names its state.",
              _READ, (_ID,), answer="ItemDetail", errors=(404, 422)),
    Operation("resendSentItem", "POST", "/sent-items/{id}/resend", "operator", "sent-items",
              "Send a done item again, as a new item",
              "Copies the done item into a new queued item (same method, sender, receiver, "
              "content and files; no origin; `resent_from` names the original) and sends it. "
              "404 when the item is unknown or not done; 409 `conflict` with details.reason "
              "`attachments_purged` when cleanup deleted its files, `content_expired` when "
              "its content expired. The copy counts one queue item against the caller's own "
              "quota (VDQ_PRODUCER_QUOTAS). A receiver suppressed since is named in "
              "`suppressed`, as an enqueue names it: its copy ends cancelled, unsent.",
              _RESEND, (_ID, _KEY),
              status=201, answer="Items", errors=(400, 404, 409, 422, 429, 503),
              idempotent=True),
    Operation("resendSentItems", "POST", "/sent-items/resend", "operator", "sent-items",
              "Send several done items again, all or nothing",
              "As resendSentItem for each id, in order, with a repeated id sent once. All or "
              "nothing: when any id is unknown or not done the answer is a 404 whose "
              "details.ids lists them, and when any has lost its files a 409 whose "
              "details.ids lists those; nothing is queued then. Each copy counts one queue "
              "item against the caller's own quota (VDQ_PRODUCER_QUOTAS).",
              _RESEND, (_KEY,),
              body="ResendRequest", status=201, answer="Items",
              errors=(400, 404, 409, 422, 429, 503), idempotent=True),
    Operation("getProducerUsage", "GET", "/producers/{producer}/usage", "operator", "producers",
              "Read a producer's quota usage",
              "The producer's limits (VDQ_PRODUCER_QUOTAS) and how many queue items it "
              "enqueued in each current window: this second, this minute, this UTC day. The "
              "producer is a machine client's id (the token's subject), or `group:<name>` for "
              "the counters a group's members share. A client charged through its group's "
              "quota in the current windows is shown with that group's counters (`counters` "
              "names them). 404 when no quota applies to it.",
              _LIST, (Param("producer", "path", "string",
                            "The client id, or `group:<name>`.", required=True,
                            pattern=PRODUCER_PATTERN),),
              answer="ProducerUsage", errors=(404, 422, 503)),
    Operation("listProducers", "GET", "/producers", "operator", "producers",
              "Read each producer's bounce and complaint rates against its thresholds",
              "The reputation guard's view: for each producer the stream counted an email of "
              "in the window (VDQ_REPUTATION_WINDOW_HOURS, counted again from a release), "
              "its emails sent, delivered, bounced (permanently), complained about and "
              "rejected, its rates (percent of the emails sent), the thresholds it is held to "
              "and its level (`warn`, `hold`, `released`), and whether items a hold parked "
              "are waiting (`parked`, whatever the level); the same for the whole account; "
              "and SES's own account reputation from CloudWatch where the deployment may read "
              f"it. Counted from the table's stream: up to {LAG_SECONDS} seconds behind.",
              _LIST, (), answer="Producers", errors=(422, 503)),
    Operation("listHeldItems", "GET", "/producers/{producer}/held", "operator", "producers",
              "List the items a producer's hold parked",
              "The producer's emails the reputation guard kept from SES while it is held, in "
              "enqueue order, a page at a time (`after`: the last id of the previous page). "
              "Each is queued (or delayed) with `held` saying why; it is sent when the hold "
              "is released, or cancelled with cancelHeldItems.",
              _LIST, (_PRODUCER,
                      Param("after", "query", "string", "The `after` of the previous page.",
                            pattern=ids.PATTERN),
                      _LIMIT),
              answer="HeldPage", errors=(422,)),
    Operation("releaseHold", "POST", "/producers/{producer}/release", "operator", "producers",
              "Release a producer's hold: send what it parked",
              "Ends the producer's hold (its new email is sent again) and sends each item the "
              "hold parked, at its attempt, in its lane, at the provider's rate; none is sent "
              "twice. Its rates count again from now: the bounces that held it do not hold it "
              "again. One request works for up to 20 seconds: when `more` is true, call it "
              "again (also after a release cut short: it sends what is still parked). 404 "
              "when the producer is not held, was never released and has nothing parked; "
              "409 when its hold "
              "changed meanwhile.",
              ("vdq.release_hold",), (_PRODUCER,), answer="HoldWork",
              errors=(404, 409, 422, 503)),
    Operation("cancelHeldItems", "POST", "/producers/{producer}/cancel-held", "operator",
              "producers", "Cancel the items a producer's hold parked",
              "Cancels each item the hold parked (the operator's cancel: its result says why); "
              "the hold stays, so the producer's new email is still held until a release. "
              "When `more` is true, call it again.",
              ("vdq.release_hold", "vdq.can_cancel"), (_PRODUCER,), answer="HoldWork",
              errors=(422, 503)),
    Operation("getAttachment", "GET", "/attachments/{id}", "operator", "attachments",
              "Download an attachment",
              "Redirects (302) to a presigned URL of the file that expires after "
              "VDQ_ATTACHMENT_URL_SECONDS. 403 for an attachment that belongs to no queued "
              "item; 410 `purged` once cleanup deleted the file (its metadata stays). With "
              "`redirect=false` the answer is a 200 `{\"url\": ...}` instead, for a web "
              "page, which cannot read a redirect.",
              _READ, (Param("id", "path", "string", "The attachment's id, as getQueueItem "
                            "lists it.", required=True, pattern=ids.PATTERN),
                      Param("redirect", "query", "boolean",
                            "false: answer 200 `{\"url\": ...}` with the presigned URL instead "
                            "of redirecting to it (a web page cannot read a redirect's "
                            "Location).", default=True)),
              status=302, errors=(404, 410, 422)),
    Operation("postAttachmentUpload", "POST", "/attachments/uploads", "enqueue", "attachments",
              "Get a presigned URL to upload a large attachment",
              "For a file too large to send inline (a request reaches the function as at most "
              "6 MiB, and base64 adds a third: about 4.5 MB of inline files). Declare the "
              "file's name, MIME type and size (at most VDQ_MAX_ATTACHMENT_BYTES); the answer "
              "is a presigned S3 URL that takes one PUT of exactly that type and size, with "
              "the headers it lists, until `expires_at` (VDQ_UPLOAD_URL_SECONDS). Then name "
              "the upload in postEmails as `{\"upload_id\": ...}`: the email takes the file "
              "(it is checked and counted like an inline one) and the upload is used up. An "
              "upload belongs to its caller, and one no email takes is deleted after a day. "
              "An upload counts one queue item against the caller's quota "
              "(VDQ_PRODUCER_QUOTAS), a repeat under its key too.",
              _ADD, (_UPLOAD_KEY,), body="UploadRequest", status=201, answer="Upload",
              errors=(400, 422, 429, 503)),
    Operation("twilioStatusCallback", "POST", "/twilio/status-callback", "webhook", "webhooks",
              "Receive Twilio's status callback for one SMS",
              "Twilio posts here as an SMS moves on; the request must carry Twilio's "
              "signature over the full URL (query string included) and the form, made with "
              "the account's auth token, or it is a 403 and nothing changes. A well-formed, "
              "authentic callback is 204 also when it is late, repeated or names no known "
              "message; 503 `contention` asks Twilio to try again. Not for other callers.",
              (), (Param("queue_item", "query", "string",
                         "The queue item the SMS was sent for, as VDQ put it in the callback "
                         "URL.", pattern=ids.PATTERN),
                   Param("attempt", "query", "string",
                         "The item's attempt the SMS was sent by, as VDQ put it in the callback "
                         "URL: a status of an earlier attempt is kept in the item's history "
                         "and moves it no more. Absent from URLs made before attempts were "
                         "signed: such a status is taken by the key only while the item is at "
                         "its first attempt.",
                         pattern=r"^[1-9][0-9]*$"),
                   Param("X-Twilio-Signature", "header", "string",
                         "Twilio's signature of the request (base64 HMAC-SHA1).",
                         required=True)),
              body="TwilioStatus", status=204, errors=(400, 403, 503), public=True),
    Operation("searchItems", "GET", "/search", "operator", "search",
              "Find items by receiver, origin, provider ID, sender, id or time, newest first",
              "Every item, active or done, that one key names, newest queued first, a page at "
              "a time: `receiver` (compared as the suppression list compares it: an address "
              "in lower case, a number in E.164), `origin_type` with `origin_id`, "
              "`provider_id` (an SES message ID or Twilio SID), `sender`, or `id`; or, with "
              "none of them, every item queued in the window `since`..`until`. `since` and "
              "`until` narrow any search to a window of enqueue times, and `method`, `state` "
              "and `priority` filter it. Searches by receiver, origin and id read an index or "
              "a key: an item is found the moment it is queued. A Twilio SID without "
              "`since` is looked up at Twilio, which says whom it went to and when: that "
              "receiver's items find it at any age; an SES message ID without `since` is "
              "looked for first in the two hours after the send time it carries. Searches "
              "by sender, provider ID (when no mapping names it and neither way finds it) "
              "and time read the stream's "
              "postings of the window (the last day unless `since` says), which follow a "
              f"change by up to {LAG_SECONDS} seconds. A request's work is bounded: a page "
              "may hold fewer "
              "items than `limit`, even none, and still carry a cursor: follow it until "
              "`cursor` is null.",
              _LIST, (Param("receiver", "query", "string", "Items sent to this receiver: "
                            + RECEIVER_TEXT + " A number may be typed with spaces, dots, "
                            "dashes or brackets, and with 00 for its +: +1 (415) 555-0100, "
                            "0044 7700 900123.", max_length=254,
                            pattern=RECEIVER_PATTERN, loose=True),
                      Param("origin_type", "query", "string", "Items of this origin (with "
                            "`origin_id`): its kind of record, as the request named it.",
                            max_length=MAX_ORIGIN_PART, pattern=SINGLE_LINE_REQUIRED),
                      Param("origin_id", "query", "string", "The origin's record id (with "
                            "`origin_type`).", max_length=MAX_ORIGIN_PART,
                            pattern=SINGLE_LINE_REQUIRED),
                      Param("provider_id", "query", "string", "The item a provider's message "
                            "ID or SID belongs to (surrounding spaces left out; a Twilio SID "
                            "or an SES message ID in any case).", max_length=256,
                            pattern=PROVIDER_ID_PATTERN, loose=True),
                      Param("sender", "query", "string", "Items sent from this address or "
                            "number (compared as a receiver is), or Messaging Service SID "
                            "(MG..., in any case).", max_length=254,
                            pattern=RECEIVER_PATTERN, loose=True),
                      Param("id", "query", "string", "The item with this id (read in any "
                            "case, surrounding spaces left out).",
                            pattern=ids.PATTERN, loose=True),
                      Param("since", "query", "string", "Only items queued at or after this "
                            "time: RFC 3339 with an offset, or a date (UTC midnight).",
                            max_length=40, pattern=TIME_PATTERN, loose=True),
                      Param("until", "query", "string", "Only items queued at or before this "
                            "time: RFC 3339 with an offset, or a date (its end, UTC).",
                            max_length=40, pattern=TIME_PATTERN, loose=True),
                      _METHOD, Param("state", "query", "string", "Only items in this state.",
                                     enum=ALL_STATES),
                      _PRIORITY, _LIMIT,
                      _cursor("the `cursor` of the previous page of the same search",
                              "for the first page")),
              answer="ItemPage", errors=(400, 422)),
    Operation("getStats", "GET", "/stats", "operator", "stats",
              "Count what entered each state, per hour or per day",
              "How many items were queued, and how often items were sent (a provider took "
              "them), delivered, bounced, complained about, rejected, errored, left "
              "unconfirmed or cancelled: per hour over the last 24 hours (`period=hours`) or "
              "per day over the last 30 (`period=days`), by method, with the totals. An item "
              "counts each time it enters a state (one retried that errors again counts twice "
              "in `errored`): a count may exceed the items a list shows in that state. "
              "`breakdown` adds, for the last 24 hours, each producer's (or each sender "
              "identity's) email sent, delivered, bounced, complained and rejected: its "
              "sending reputation (its SMS are in the counts by method, not here). Counted "
              "from the table's stream: a count follows what happened by up to "
              f"{LAG_SECONDS} seconds.",
              _LIST, (Param("period", "query", "string", "Hourly buckets of the last 24 "
                            "hours, or daily ones of the last 30 days.", enum=PERIODS,
                            default="hours"),
                      Param("method", "query", "string", "Only this method's counts.",
                            enum=METHODS),
                      Param("breakdown", "query", "string", "Email per producer or per "
                            "sender identity (with `period=hours`).", enum=BREAKDOWNS)),
              answer="Stats", errors=(422, 503)),
    Operation("listSuppressions", "GET", "/suppressions", "operator", "suppressions",
              "List the suppression list, by receiver",
              "The receivers VDQ does not send to, in receiver order, a page at a time: each "
              "with why (`reason`), since when, and who put it there. One list per deployment: "
              "every producer's items to a suppressed receiver end cancelled without reaching "
              "the provider. An entry with a `list` is an address's unsubscribe from that "
              "list only: it stops that list's mail, nothing else. `receiver` looks up one "
              "receiver's entries (one page: its entry for everything, then its lists').",
              _SUPPRESSIONS_LIST,
              (Param("receiver", "query", "string", "Only this receiver (address or number).",
                     max_length=254, pattern=RECEIVER_PATTERN, loose=True),
               Param("channel", "query", "string", "Only addresses or only numbers.",
                     enum=CHANNELS), _LIMIT, _CURSOR),
              answer="SuppressionPage", errors=(400, 422)),
    Operation("addSuppression", "POST", "/suppressions", "operator", "suppressions",
              "Suppress a receiver",
              "Puts an address or number on the suppression list (reason `operator`, the "
              "caller as actor, in its history); with `list`, unsubscribes an address from "
              "that list only. A receiver suppressed already keeps its first reason and "
              "`since`: `added` is false.",
              _SUPPRESSIONS_CHANGE, (), body="SuppressionRequest", answer="SuppressionChange",
              errors=(400, 422)),
    Operation("removeSuppression", "DELETE", "/suppressions/{receiver}", "operator",
              "suppressions", "Take a receiver off the suppression list",
              "VDQ sends to the receiver again (items cancelled meanwhile stay cancelled: "
              "resend them); with `list`, sends it that list's mail again. The removal, with "
              "the caller and `text` (why), goes to the receiver's history. 404 when there is "
              "no such entry (its message names the lists the receiver left, if any).",
              _SUPPRESSIONS_CHANGE, (_RECEIVER, _LIST_PARAM,
                                     Param("text", "query", "string", "Why, for the "
                                           "receiver's history (one line).", max_length=500,
                                           pattern=SINGLE_LINE)),
              answer="SuppressionRemoved", errors=(404, 422)),
    Operation("getSuppressionHistory", "GET", "/suppressions/{receiver}/history", "operator",
              "suppressions", "Read a receiver's suppression and its history",
              "The receiver's suppression (null when it is not suppressed now), the lists it "
              "is unsubscribed from, and every addition, removal and note (an SMS HELP), "
              "oldest first, with who and when.",
              _SUPPRESSIONS_LIST, (_RECEIVER,), answer="SuppressionHistory",
              errors=(404, 422)),
    Operation("twilioInbound", "POST", "/twilio/inbound", "webhook", "webhooks",
              "Receive an inbound SMS (STOP, START, HELP)",
              "Twilio posts here when someone texts a number of the account (set it as the "
              "number's incoming-message webhook). Signed as the status callback is: a bad "
              "signature is a 403 and nothing changes. STOP, STOPALL, UNSUBSCRIBE, CANCEL, "
              "END, QUIT, REVOKE and OPTOUT (one word, any case) suppress the sender's number; "
              "START, UNSTOP and YES remove its opt-out; HELP and INFO are recorded in its "
              "history. Twilio's `OptOutType` wins over the body. The answer is empty TwiML: "
              "Twilio sends its own confirmations. Not for other callers.",
              (), (Param("X-Twilio-Signature", "header", "string",
                         "Twilio's signature of the request (base64 HMAC-SHA1).",
                         required=True),),
              body="TwilioInbound", status=200, errors=(400, 403), public=True,
              media="text/xml"),
    Operation("getUnsubscribe", "GET", "/unsubscribe/{token}", "webhook", "unsubscribe",
              "Show the one-click unsubscribe page",
              "The page an email's List-Unsubscribe link opens: it names the list and the "
              "address, masked (`a***@example.org`: whoever holds the URL reads the page), and "
              "holds a button that POSTs to the same URL. Reading it changes nothing "
              "(mail scanners fetch links). No page may frame it (`frame-ancestors 'none'`). "
              "404 for a token that is not valid; 503 when the key cannot be read.",
              (), (_TOKEN,), status=200, errors=(404, 503), public=True, media="text/html"),
    Operation("postUnsubscribe", "POST", "/unsubscribe/{token}", "webhook", "unsubscribe",
              "Unsubscribe in one click (RFC 8058)",
              "What a mail client POSTs (`List-Unsubscribe=One-Click`) and what the page's "
              "button sends: the token's address is unsubscribed from the token's list (a "
              "suppression list entry with that `list`, reason `unsubscribe`): that list's "
              "mail to it ends cancelled, other mail still goes out. No sign-in: the token is "
              "the authority. Repeating it changes nothing more. 404 for a token that is not "
              "valid. RFC 8058: only a POST whose body is `List-Unsubscribe=One-Click` (a "
              "form, urlencoded or multipart; also the pair labelled text/plain, as a client "
              "in a web page posts a string) unsubscribes; any other POST (a link checker's "
              "bare one) changes nothing and answers 400 with the confirmation page. 503 with "
              "`Retry-After` when the store (or the key) failed and nothing changed: mail "
              "clients try again.",
              (), (_TOKEN,), body="OneClickUnsubscribe", status=200, errors=(400, 404, 503),
              public=True, media="text/html"),
    Operation("health", "GET", "/health", "operator", "service", "Check readiness",
              "200 `ok` when the API answers. The local stack answers 503 `starting` until "
              "all of its parts are up, with the state of each.", (), status=200,
              answer="Health", errors=(503,), public=True),
    Operation("openapi", "GET", "/openapi.json", "operator", "service",
              "Get this OpenAPI document",
              "The contract of the API as OpenAPI 3.1: what a client generator needs.", (),
              status=200, answer="OpenApiDocument", public=True),
)  # fmt: skip

BY_ID = {op.id: op for op in OPERATIONS}

