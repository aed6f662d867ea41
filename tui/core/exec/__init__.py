"""Where a run's steps run (the executors): see base.py. Both implementations are imported here, so that
Executor.get_class knows them; Ray itself is imported only when a run asks for a cluster (ray.py)."""

from tui.core.exec.base import ExecConfig, Executor, ExecutorError
from tui.core.exec.local import LocalExecutor
from tui.core.exec.ray import RayExecutor

__all__ = ["ExecConfig", "Executor", "ExecutorError", "LocalExecutor", "RayExecutor"]
