"""Fault schedules against a real kbroker cluster, checked like Jepsen (issue 15).

``python -m chaos.run --seed N`` starts ZooKeeper and three brokers, each in its own network
namespace, runs a workload (chaos/workload.py) in a namespace of its own while the seeded
schedule (chaos/schedule.py) partitions, pauses, kills and fills the disks of nodes, heals
everything, and checks the recorded history (chaos/checker.py).
"""
