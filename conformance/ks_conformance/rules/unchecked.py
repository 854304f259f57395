"""spec/checking.md section 3: the requirements without a rule of their own, and how each is judged instead."""

from __future__ import annotations

INDIRECT: dict[str, str] = {
    "KS-GEN-1": "a definition: a trace declares its profile by construction",
    "KS-GEN-2": "a definition: a trace counts in ticks by construction",
    "KS-GEN-3": "checked through incarnations: an ack of a reused name's predecessor's delivery is stale-ack-accepted",
    "KS-GEN-6": "checked through idle-while-ready",
    "KS-GEN-8": "checked through idle-while-ready: under read_trigger heartbeat its window holds only what was read, "
    "except at the end of a tick, when every message of the read bound must have been read",
    "KS-GEN-9": "checked through missed-timeout, missed-eviction, persist-late and idle-while-ready (a retry made "
    "ready), each waiting timer_slack ticks more; a timer that fires early is judged by its own requirement",
    "KS-CUR-12": "checked through persist-late and persist-early, whose due point under persist_trigger advance is an "
    "op that moved the cursor once persist_interval ticks have passed, or a flush tick (persist_flush)",
    "KS-ASN-3": "statistical; tested on the reference's selectors, not judged per trace",
    "KS-ASN-4": "exact routing of a named selector; tested against published values by the reference's tests",
    "KS-ASN-5": "exact routing of a named selector; tested against published values by the reference's tests",
    "KS-ASN-6": "exact routing of a named selector; tested against published values by the reference's tests",
    "KS-ASN-7": "exact routing of a named selector; tested against published values by the reference's tests",
    "KS-ASN-8": "exact routing of a named selector; tested against published values by the reference's tests",
    "KS-ASN-9": "checked through key-moved: a redelivery goes to the epoch's target",
    "KS-ASN-10": "a definition: selector any is judged through idle-while-ready and split-owner",
    "KS-ASN-11": "a definition: the partition function is the implementation's; selector partitions is judged through "
    "key-moved and unstable-assignment (a key moves only away from a leaver)",
    "KS-FLT-1": "a definition the checker uses itself; tested on the reference",
    "KS-FLT-5": "a definition the checker uses itself; tested on the reference",
    "KS-ORD-4": "a permission, not an obligation",
    "KS-DRN-3": "a permission, not an obligation: the holds it allows are the ones idle-while-ready accepts",
    "KS-POI-1": "checked through unjustified-resolution and stuck-key",
    "KS-RES-3": "checked through persist-late and cursor-stall",
    "KS-CUR-6": "a property of the store; tested on the reference with a million holes",
    "KS-ISO-2": "observed only through idle-while-ready",
    "KS-ISO-3": "observed only through idle-while-ready, whose window under read_bound lookahead is the messages "
    "that fewer than L earlier waiting messages precede",
    "KS-ISO-4": "observed through idle-while-ready and window-overrun, whose counts leave the parked messages out",
    "KS-ISO-5": "not observable from outside: what a dispatcher keeps of a parked message does not show in its events",
    "KS-FLW-5": "not observable from outside: a read shows only when its message is delivered, held or resolved, "
    "possibly ops later, when the number of waiting messages has changed",
    "KS-BKT-2": "a property of the layout operations; misrouted-bucket shows its violations",
    "KS-BKT-7": "observability without a fixed value to compare",
    "KS-OBS-3": "observability without a fixed value to compare",
}
"""spec/checking.md section 3: requirements without a check of their own, and why."""
