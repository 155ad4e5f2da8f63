"""Helpers that run inside sandboxes, for evolved tools (toolzoo/evolve.py): an evolved
implementation that converts cents, units or dates carries the source of the helpers it uses
(`HELPERS`, by name), so it stays self-contained. Standard library only."""

from __future__ import annotations


# These run inside sandboxes: their source is copied into the implementations that use them.
def _evo_h_cents_to_decimal(obj):
    """Every integer `<x>_cents` field becomes `<x>` (or `<x>_decimal`) holding a decimal string."""
    if isinstance(obj, list):
        return [_evo_h_cents_to_decimal(v) for v in obj]
    if not isinstance(obj, dict):
        return obj
    out = {}
    for k, v in obj.items():
        if isinstance(k, str) and k.endswith("_cents") and len(k) > 6 and isinstance(v, int) and not isinstance(v, bool):
            base = k[:-6]
            new = base if base not in obj else base + "_decimal"
            out[new] = "%s%d.%02d" % ("-" if v < 0 else "", abs(v) // 100, abs(v) % 100)
        else:
            out[k] = _evo_h_cents_to_decimal(v)
    return out


def _evo_h_decimal_to_cents(text):
    """ "29.99" -> 2999, exactly (no floats)."""
    s = str(text).strip()
    neg = s.startswith("-")
    whole, _, frac = s.lstrip("+-").partition(".")
    cents = int(whole or "0") * 100 + int((frac + "00")[:2])
    return -cents if neg else cents


def _evo_h_convert_cents(obj, rate, digits):
    """Every integer `<x>_cents` field becomes `<x>_amount` in another currency at `rate` per dollar."""
    if isinstance(obj, list):
        return [_evo_h_convert_cents(v, rate, digits) for v in obj]
    if not isinstance(obj, dict):
        return obj
    out = {}
    for k, v in obj.items():
        if isinstance(k, str) and k.endswith("_cents") and len(k) > 6 and isinstance(v, int) and not isinstance(v, bool):
            amount = round(v * rate / 100.0, digits)
            out[k[:-6] + "_amount"] = int(amount) if digits == 0 else amount
        else:
            out[k] = _evo_h_convert_cents(v, rate, digits)
    return out


def _evo_h_imperial(obj, units):
    """Metric fields (`x_kg`, `x_km`, `x_celsius`, ...) become imperial ones (`x_lb`, `x_mi`, `x_fahrenheit`)."""
    if isinstance(obj, list):
        return [_evo_h_imperial(v, units) for v in obj]
    if not isinstance(obj, dict):
        return obj
    out = {}
    for k, v in obj.items():
        hit = None
        if isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool):
            for suffix in sorted(units, key=len, reverse=True):
                if k.endswith(suffix) and len(k) > len(suffix):
                    hit = suffix
                    break
        if hit is None:
            out[k] = _evo_h_imperial(v, units)
            continue
        new_suffix, factor = units[hit]
        value = v * 9.0 / 5.0 + 32.0 if factor is None else v * factor
        out[k[: -len(hit)] + new_suffix] = round(value, 2)
    return out


def _evo_h_days_to_date(days, ref):
    import datetime

    return (datetime.date.fromisoformat(ref) + datetime.timedelta(days=int(days))).isoformat()


def _evo_h_dates_to_days(obj, ref):
    """ISO dates ("2025-03-12") become day offsets from `ref`; a field `k` holding one is renamed `k_days`."""
    import datetime
    import re as _re

    def conv(v):
        if isinstance(v, str) and _re.match(r"^\d{4}-\d{2}-\d{2}$", v):
            try:
                return (datetime.date.fromisoformat(v) - datetime.date.fromisoformat(ref)).days, True
            except ValueError:
                return v, False
        return v, False

    if isinstance(obj, list):
        return [_evo_h_dates_to_days(v, ref) if isinstance(v, (list, dict)) else conv(v)[0] for v in obj]
    if not isinstance(obj, dict):
        return conv(obj)[0]
    out = {}
    for k, v in obj.items():
        new, changed = conv(v)
        if changed and isinstance(k, str) and (k + "_days") not in obj:
            out[k + "_days"] = new
        else:
            out[k] = _evo_h_dates_to_days(v, ref) if isinstance(v, (list, dict)) else new
    return out


HELPERS = {f.__name__: f for f in (_evo_h_cents_to_decimal, _evo_h_decimal_to_cents, _evo_h_convert_cents,
                                   _evo_h_imperial, _evo_h_days_to_date, _evo_h_dates_to_days)}
