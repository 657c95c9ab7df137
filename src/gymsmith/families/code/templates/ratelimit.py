"""A token-bucket rate limiter driven by an explicit clock (integer ticks)."""


class TokenBucket:
    def __init__(self, capacity, refill_per_tick=1, now=0):
        if capacity <= 0 or refill_per_tick < 0:
            raise ValueError("capacity must be positive and refill non-negative")
        self.capacity = capacity
        self.refill_per_tick = refill_per_tick
        self.tokens = capacity
        self.updated = now

    def _refill(self, now):
        if now < self.updated:
            raise ValueError("time went backwards")
        self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.refill_per_tick)
        self.updated = now

    def allow(self, now, cost=1):
        self._refill(now)
        if self.tokens >= cost:
            self.tokens -= cost
            return True
        return False

    def wait_time(self, now, cost=1):
        self._refill(now)
        missing = cost - self.tokens
        if missing <= 0:
            return 0
        if self.refill_per_tick == 0:
            return None
        return -(-missing // self.refill_per_tick)


def admitted(bucket, requests):
    return [t for t in requests if bucket.allow(t)]
