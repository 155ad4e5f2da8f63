"""A parcel carrier's customer desk: quotes, labels, tracking, reroutes, label cancellations and claims."""

CATEGORY = "transportation_logistics"
DESCRIPTION = "Parcel carrier support for business accounts: price quotes, creating shipments, tracking, rerouting, cancelling labels and filing claims."
FAILURE_MODES = [
    {"kind": "timeout", "tools": ["create_parcel_shipment", "reroute_parcel"],
     "message": "the label service timed out; nothing was created or changed, retry"},
    {"kind": "rate_limit", "tools": ["track_parcel", "get_parcel_quote"]},
    {"kind": "partial", "tools": ["list_parcel_shipments"]},
]
