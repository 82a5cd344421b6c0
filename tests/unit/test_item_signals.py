"""The signals a list shows beside an item's state, read from its result."""

from vdq.workflow.views import signals_of


def test_a_send_stopped_by_a_list_unsubscribe_is_marked_suppressed_as_a_full_one_is():
    """Found in use: an item cancelled because its receiver unsubscribed from the email's list
    showed no badge, where one cancelled for a full suppression showed `suppressed`."""
    full = ("not sent: bob@example.com is on the suppression list since 2026-12-07T10:00:00Z "
            "(a permanent bounce)")
    listed = ('not sent: ada@example.com unsubscribed from the list "newsletter" since '
              "2026-12-07T10:00:00Z (one-click unsubscribe); mail of other lists and of no list "
              "still goes out")  # fmt: skip
    assert signals_of([], full) == ["suppressed"]
    assert signals_of([], listed) == ["suppressed"]
    assert signals_of([], "SES delivered the message: 250 OK") == []
