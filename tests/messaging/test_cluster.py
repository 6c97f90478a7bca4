"""Against a real 3-node RabbitMQ cluster (``bench/kit/cluster.py``, on loopback, beside the test broker):
quorum queues have a replica on every node, lose nothing when their leader is killed, and the
publisher carries on through another node.

One cluster for the module (it starts in about 20 s); a test that kills a node starts it again.
"""

from __future__ import annotations

import json
import os
from typing import Iterator

import pytest

from bench.kit.cluster import Cluster, free_base_port
from tests.conftest import SESSION_PREFIX, wait_until
from webhooks.messaging.brokers import connect
from webhooks.config import Settings
from webhooks.messaging.publisher import Publisher
from webhooks.messaging.topology import Topology


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    made = Cluster(tmp_path_factory.mktemp("rabbit-cluster"), free_base_port(), name=f"test-{os.getpid()}")
    try:
        made.start()
        yield made
    finally:
        made.stop()


@pytest.fixture(scope="module")
def topology(cluster: Cluster) -> Topology:
    declared = Settings.from_env(env={}, amqp_url=cluster.amqp_url, queue_prefix=f"{SESSION_PREFIX}_cluster",
                                 ladder="1s,2s").topology
    connection = connect(cluster.amqp_url, 5.0)
    try:
        declared.declare(connection.channel())
    finally:
        connection.close()
    return declared


def drain(amqp_url: str, queue: str) -> list[int]:
    """Every message of ``queue`` (acked: the queue is emptied), as the numbers they carry."""
    connection = connect(amqp_url, 5.0)
    try:
        channel = connection.channel()
        numbers = []
        while True:
            method, _properties, body = channel.basic_get(queue, auto_ack=True)
            if method is None:
                return numbers
            numbers.append(json.loads(body)["n"])
    finally:
        connection.close()


def batch(queue: str, count: int, start: int = 0) -> list[tuple[str, bytes, dict]]:
    return [(queue, json.dumps({"n": n}).encode(), {}) for n in range(start, start + count)]


def _leader_if_listed(cluster: Cluster, queue: str) -> str | None:
    """The queue's leader, or None while no running node lists it: for a moment after its leader
    is killed the others may leave it out of ``list_queues`` (as the failover drill allows)."""
    try:
        return cluster.leader(queue)[0]
    except KeyError:
        return None


def test_every_quorum_queue_has_a_replica_on_every_node(cluster: Cluster, topology: Topology) -> None:
    every_node = sorted(node.name for node in cluster.nodes)

    for queue in topology.all_queues():
        _leader, members = cluster.leader(queue)
        assert sorted(members) == every_node, queue


def test_a_quorum_queue_keeps_every_message_when_its_leader_is_killed(cluster: Cluster, topology: Topology) -> None:
    publisher = Publisher(cluster.amqp_url, timeout=2.0)
    try:
        assert publisher.publish(batch(topology.primary, 2000)) == 2000
    finally:
        publisher.close()
    leader_name, _members = cluster.leader(topology.primary)
    leader = cluster.node_named(leader_name)

    cluster.kill(leader)
    try:
        new_leader = wait_until(lambda: _leader_if_listed(cluster, topology.primary) not in (None, leader_name), timeout=30)
        assert new_leader

        assert drain(cluster.amqp_url, topology.primary) == list(range(2000))
    finally:
        cluster.restart(leader)


def test_the_publisher_carries_on_through_another_node_when_its_node_is_killed(
    cluster: Cluster, topology: Topology
) -> None:
    publisher = Publisher(cluster.amqp_url, timeout=2.0)
    try:
        assert publisher.publish(batch(topology.primary, 100)) == 100
        first = cluster.nodes[0]
        assert publisher.node == f"127.0.0.1:{first.amqp_port}"  # the first node that answers

        cluster.kill(first)
        try:
            confirmed = publisher.publish(batch(topology.primary, 100, start=100))

            assert confirmed == 100
            assert publisher.node != f"127.0.0.1:{first.amqp_port}"
            assert sorted(set(drain(cluster.amqp_url, topology.primary))) == list(range(200))
        finally:
            cluster.restart(first)
    finally:
        publisher.close()
