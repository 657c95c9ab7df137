"""A least-recently-used cache with a fixed capacity."""


class LRUCache:
    def __init__(self, capacity=2):
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._items = {}
        self._order = []

    def _touch(self, key):
        if key in self._order:
            self._order.remove(key)
        self._order.append(key)

    def get(self, key, default=None):
        if key not in self._items:
            return default
        self._touch(key)
        return self._items[key]

    def put(self, key, value):
        self._items[key] = value
        self._touch(key)
        while len(self._order) > self.capacity:
            oldest = self._order.pop(0)
            del self._items[oldest]

    def __len__(self):
        return len(self._items)

    def keys(self):
        return list(self._order)
