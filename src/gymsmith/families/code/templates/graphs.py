"""Breadth-first search on adjacency-list graphs."""

from collections import deque


def neighbours(graph, node):
    return sorted(graph.get(node, ()))


def bfs_order(graph, start):
    seen, order, queue = {start}, [], deque([start])
    while queue:
        node = queue.popleft()
        order.append(node)
        for nxt in neighbours(graph, node):
            if nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    return order


def shortest_path(graph, start, goal):
    if start == goal:
        return [start]
    parents, queue = {start: None}, deque([start])
    while queue:
        node = queue.popleft()
        for nxt in neighbours(graph, node):
            if nxt in parents:
                continue
            parents[nxt] = node
            if nxt == goal:
                path = [goal]
                while parents[path[-1]] is not None:
                    path.append(parents[path[-1]])
                return path[::-1]
            queue.append(nxt)
    return None


def distance(graph, start, goal):
    path = shortest_path(graph, start, goal)
    return -1 if path is None else len(path) - 1


def reachable(graph, start):
    return set(bfs_order(graph, start))
