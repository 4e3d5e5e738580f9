"""A payment-style job: charge once per slot, however many times the run is attempted.

raftcron runs a job at least once: an attempt whose worker dies, or whose answer is lost on
the network, is leased again. A charge must still happen once, so the handler passes
`ctx.idempotency_key` to the payment API, which remembers the keys it has seen and answers a
repeated request with the first charge instead of charging again. The key is derived from
the run key alone, so every attempt of one slot sends the same key, and the next slot a new one.
(The fencing token would be the wrong key here: it changes with every attempt.)

Run it to see a retried attempt that does not charge twice:

    python examples/payment_job.py

Serve it from a worker (target `payments.charge`, payload {"customer": ..., "amount_cents": ...}):

    raftcron worker --handlers examples.payment_job:HANDLERS
"""

from __future__ import annotations

import itertools
import threading

from worker import RetryLater, RunContext


class PaymentProviderBusy(Exception):
    """The provider asks us to come back later (HTTP 429/503)."""


class FakePaymentAPI:
    """Stands in for a payment provider with idempotency keys (as most real ones offer)."""

    def __init__(self) -> None:
        self.charges: dict[str, dict] = {}  # idempotency key -> charge
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self.lose_next_response = False  # simulate a timeout after the charge was made
        self.busy = False

    def charge(self, customer: str, amount_cents: int, idempotency_key: str) -> dict:
        if self.busy:
            raise PaymentProviderBusy("try again in a minute")
        with self._lock:
            charge = self.charges.get(idempotency_key)
            if charge is None:  # a new request: charge for real
                charge = {"id": f"ch_{next(self._ids)}", "customer": customer, "amount_cents": amount_cents}
                self.charges[idempotency_key] = charge
            elif (charge["customer"], charge["amount_cents"]) != (customer, amount_cents):
                raise ValueError("idempotency key reused with different parameters")
            if self.lose_next_response:
                self.lose_next_response = False
                raise TimeoutError("payment provider did not answer in time")
        return charge


PAYMENTS = FakePaymentAPI()


def charge_subscription(ctx: RunContext) -> None:
    order = ctx.payload
    try:
        charge = PAYMENTS.charge(order["customer"], order["amount_cents"], idempotency_key=ctx.idempotency_key)
    except PaymentProviderBusy as busy:
        raise RetryLater(60, f"payment provider busy: {busy}") from busy
    print(f"{ctx.run_key} attempt {ctx.attempt}: charge {charge['id']} for {charge['amount_cents']} cents")


HANDLERS = {"payments.charge": charge_subscription}


if __name__ == "__main__":
    import logging
    from datetime import datetime, timezone

    from worker.testing import run_handler

    logging.getLogger("raftcron").setLevel(logging.ERROR)  # the failed attempt is expected here
    JOB_ID = "payments.monthly"

    order = {"customer": "cus_42", "amount_cents": 1999}
    slot = datetime(2026, 1, 1, tzinfo=timezone.utc)
    PAYMENTS.lose_next_response = True
    first = run_handler(charge_subscription, order, job_id=JOB_ID, scheduled_at=slot, attempt=1, fencing_token=10)
    print(f"attempt 1: {first.kind} ({first.error})")  # charged, but the answer was lost
    second = run_handler(charge_subscription, order, job_id=JOB_ID, scheduled_at=slot, attempt=2, fencing_token=17)
    print(f"attempt 2: {second.kind}")
    print(f"charges made: {len(PAYMENTS.charges)}")  # 1: the retry reused the first charge
