"""A stand-in for TensorFlow in the tests (TensorFlow cannot be installed here): only the part of
tf.distribute that reads TF_CONFIG, as TensorFlow's TFConfigClusterResolver does it, and nothing
else. Any other attribute raises AttributeError, so that an example that needs more of
TensorFlow fails here instead of passing against a fake.

TensorFlow's rules kept: TF_CONFIG is a JSON object; "cluster" maps each job name to a list of
"host:port" addresses; "task" has "type" (a job of the cluster) and "index" (below that job's
size); a missing or empty TF_CONFIG is a cluster of one local task.
"""

import json
import os

__version__ = "0.0-primus-test-stub"


class ClusterSpec:
    def __init__(self, jobs):
        self._jobs = {name: list(addresses) for name, addresses in jobs.items()}

    def as_dict(self):
        return {name: list(addresses) for name, addresses in self._jobs.items()}

    @property
    def jobs(self):
        return list(self._jobs)

    def num_tasks(self, job_name):
        return len(self._jobs[job_name])

    def task_address(self, job_name, task_index):
        return self._jobs[job_name][task_index]


class TFConfigClusterResolver:
    def __init__(self):
        text = os.environ.get("TF_CONFIG", "")
        config = json.loads(text) if text.strip() else {}
        if not isinstance(config, dict):
            raise ValueError(f"TF_CONFIG: expected a JSON object, got {text!r}")
        cluster = config.get("cluster", {})
        if not isinstance(cluster, dict) or not all(
                isinstance(a, list) and all(isinstance(x, str) and ":" in x for x in a)
                for a in cluster.values()):
            raise ValueError(f"TF_CONFIG: 'cluster' must map job names to lists of host:port, "
                             f"got {cluster!r}")
        task = config.get("task", {})
        self.task_type = task.get("type")
        self.task_id = task.get("index")
        if cluster:
            if self.task_type not in cluster:
                raise ValueError(f"TF_CONFIG: task type {self.task_type!r} is not a job of the "
                                 f"cluster {sorted(cluster)}")
            if not isinstance(self.task_id, int) or not 0 <= self.task_id < len(
                    cluster[self.task_type]):
                raise ValueError(f"TF_CONFIG: task index {self.task_id!r} is not below "
                                 f"{len(cluster[self.task_type])}")
        self._spec = ClusterSpec(cluster)

    def cluster_spec(self):
        return self._spec


class MultiWorkerMirroredStrategy:
    def __init__(self, cluster_resolver=None):
        self.cluster_resolver = cluster_resolver or TFConfigClusterResolver()
        spec = self.cluster_resolver.cluster_spec().as_dict()
        self.num_replicas_in_sync = len(spec.get("worker", [])) + len(spec.get("chief", [])) or 1


class _Namespace:
    def __init__(self, name, **members):
        self._name = name
        self.__dict__.update(members)

    def __getattr__(self, attribute):
        raise AttributeError(f"the test stub of tensorflow has no {self._name}.{attribute}")


distribute = _Namespace("tf.distribute", MultiWorkerMirroredStrategy=MultiWorkerMirroredStrategy,
                        cluster_resolver=_Namespace(
                            "tf.distribute.cluster_resolver",
                            TFConfigClusterResolver=TFConfigClusterResolver))


def __getattr__(name):
    raise AttributeError(f"the test stub of tensorflow has no tf.{name}")
