"""The signals a list shows beside an item's state, read from its result."""

from vdq.workflow.views import entry_signals, signals_of


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


def test_only_twilios_opt_out_error_marks_stop_not_any_text_holding_its_digits():
    """Found in use: a delivered email whose SMTP answer held Gmail's time stamp 1762161012,
    and an SMS whose Twilio SID held the digits 21610, were marked ``stop``."""
    assert entry_signals("succeed", "SES delivered the message: 250 2.0.0 OK  1762161012 "
                         "d75a77b69052e-4ae6b3c1si2345678b6.12 - gsmtp") == set()  # fmt: skip
    sid = "SM21610e3b6f0a4c2d8e1f9a7b5c3d1e0f"
    assert entry_signals("await", f"accepted by Twilio as {sid}") == set()
    assert entry_signals("error", "SES bounce (Permanent/General): order-21610@example.org: "
                         "smtp; 550 5.1.1 user unknown") == {"bounce"}  # fmt: skip
    # What Twilio's opt-out error writes: a status callback's or a fetch's, and a send's refusal.
    assert entry_signals("error", "Twilio reported failed, error 21610 (the receiver replied "
                         "STOP)") == {"stop"}  # fmt: skip
    assert entry_signals("error", "Twilio reported undelivered, error 21610: Attempt to send to "
                         "unsubscribed recipient") == {"stop"}  # fmt: skip
    assert entry_signals(None, "Twilio (21610): Attempt to send to unsubscribed recipient; "
                         "+14155550100 is on the suppression list from now on") == {"stop"}
