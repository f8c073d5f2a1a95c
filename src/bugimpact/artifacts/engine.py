"""The Docker engine, through the Docker SDK for Python: the one way this package speaks to it.

Images are built and containers run as objects of the engine's API; their output is streamed into
the caller's log as it comes; a failure is the SDK's typed error, turned here into a message that
names the image or container. A container that must stop (a timeout, an interrupt, a killed job)
is killed and removed, and ``run`` returns or raises only once it is gone: a build or a run left
behind would go on using the CPUs, GPU or files of the study.

The CLI is used only where no Python package is installed yet (bin/start-docker, which starts the
daemon; bin/make-base-image, which pipes a debootstrap tree into ``docker import``).
"""
import contextlib
import signal
import threading
import time
from typing import Optional

import docker
import requests
from docker.errors import APIError, ContainerError, DockerException, ImageNotFound, NotFound
from docker.types import DeviceRequest


class EngineError(RuntimeError):
    """The engine refused or failed; the message names what was asked of it."""


class Engine:
    """A client of the local Docker engine (``DOCKER_HOST`` and the other variables of the CLI)."""

    def __init__(self, timeout=120):
        try:
            # each call's limit, so that a hung engine is said; streams (a build's or a container's
            # output, which may pause for an epoch or a long compile) have none
            self.client = docker.from_env(timeout=timeout)
        except DockerException as exc:
            raise EngineError(f"no Docker engine answers: {exc}") from None

    @staticmethod
    def answers():
        """Whether an engine answers here (for preflight, gc and the tests: never raises)."""
        try:
            return Engine(timeout=10).client.ping()
        except (EngineError, DockerException, requests.RequestException):
            return False

    # images

    def image_id(self, tag) -> Optional[str]:
        """The id of the image ``tag`` names, or None when there is none."""
        try:
            return self.client.images.get(tag).id
        except ImageNotFound:
            return None

    def images(self, repositories):
        """(repo:tag, size in bytes) of each image tag in ``repositories``."""
        found = []
        for repository in repositories:
            for image in self.client.images.list(name=repository):
                found += [(tag, int(image.attrs.get("Size") or 0)) for tag in image.tags
                          if tag.split(":")[0] == repository]
        return sorted(found)

    def remove_image(self, tag):
        """Remove an image tag; "" when done, else the engine's reason (e.g. a container uses it)."""
        try:
            self.client.images.remove(tag)
        except NotFound:
            return ""
        except APIError as exc:
            return str(exc.explanation or exc)
        return ""

    def in_registry(self, image, timeout=30):
        """Whether a registry serves ``image`` (its manifest only: nothing is pulled)."""
        try:
            docker.from_env(timeout=timeout).images.get_registry_data(image)
            return True
        except (APIError, DockerException, requests.RequestException):
            return False

    def build(self, context, tag, log, buildargs=None):
        """Build ``context`` (a folder with a Dockerfile) as ``tag``, its output streamed to
        ``log``. Intermediate containers are removed, failed or not."""
        try:
            for chunk in self.client.api.build(path=str(context), tag=tag, buildargs=buildargs or {},
                                               rm=True, forcerm=True, decode=True):
                log.write(chunk.get("stream") or (chunk["error"] + "\n" if "error" in chunk else ""))
                log.flush()
                if "error" in chunk:
                    raise EngineError(f"image {tag} did not build: {chunk['error']}")
        except APIError as exc:
            raise EngineError(f"image {tag} did not build: {exc}") from None

    # volumes

    def volume(self, name):
        """The named volume; created when missing. Returns whether it was created."""
        try:
            self.client.volumes.get(name)
            return False
        except NotFound:
            self.client.volumes.create(name)
            return True

    # containers

    def output(self, image, command, **options):
        """What ``command`` prints to stdout in a fresh container of ``image``, without network;
        a non-zero exit raises ``EngineError`` with the end of its stderr."""
        options.setdefault("network_mode", "none")
        try:
            return self.client.containers.run(image, command, remove=True, stdout=True, stderr=False,
                                              **options).decode()
        except ContainerError as exc:
            stderr = (exc.stderr or b"").decode(errors="replace").strip()[-1500:]
            raise EngineError(f"{command[0]} in {image} exited {exc.exit_status}: {stderr}") from None
        except (ImageNotFound, APIError) as exc:
            raise EngineError(f"{command[0]} in {image} did not start: {exc}") from None

    def run(self, image, command, *, name, log, timeout=None, **options):
        """Run ``command`` in a container named ``name``, stdout and stderr streamed to ``log``;
        returns its exit code. After ``timeout`` seconds it raises ``TimeoutError``; on that, on
        an interrupt or on SIGTERM (what SLURM and a stopped job send) the container is killed,
        and it is gone before this returns or raises."""
        self.remove(name)  # one left by a job killed before it could remove it (names are unique per task)
        try:
            container = self.client.containers.create(image, command, name=name, **options)
        except (ImageNotFound, APIError) as exc:
            raise EngineError(f"container {name} of {image} was not created: {exc}") from None
        pump = threading.Thread(target=self._stream, args=(container.id, log), daemon=True)
        with _sigterm_as_exit():
            try:
                container.start()
                pump.start()
                started = time.monotonic()
                try:
                    code = container.wait(timeout=timeout)["StatusCode"]
                except (requests.Timeout, requests.ConnectionError):  # how a read timeout on the socket shows
                    if timeout is None or time.monotonic() - started < timeout:
                        raise
                    raise TimeoutError(f"container {name} still ran after {timeout}s") from None
                pump.join()
                return code
            finally:
                self.remove(name)
                if pump.is_alive():
                    pump.join(timeout=10)

    def _stream(self, container_id, log):
        for chunk in self.client.api.logs(container_id, stream=True, follow=True, stdout=True, stderr=True):
            log.write(chunk.decode(errors="replace"))
            log.flush()

    def remove(self, name, patience=60):
        """Kill and remove the container ``name``, and wait until the engine no longer has it;
        gone already is fine."""
        deadline = time.monotonic() + patience
        while True:
            try:
                self.client.containers.get(name).remove(force=True)  # returns once it is gone
                return
            except NotFound:
                return
            except APIError as exc:
                if exc.status_code != 409:  # 409: its removal is already under way: wait for it
                    raise EngineError(f"container {name} was not removed: {exc}") from None
            if time.monotonic() > deadline:
                raise EngineError(f"container {name} was not gone {patience}s after it was removed")
            time.sleep(0.2)


@contextlib.contextmanager
def _sigterm_as_exit():
    """SIGTERM raises SystemExit here (in the main thread, where Python handles signals), so that
    the container is removed before the process ends; the handler before is restored after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def leave(signum, frame):
        raise SystemExit(128 + signum)

    before = signal.signal(signal.SIGTERM, leave)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def gpu_requests(devices):
    """The engine's device request for these host GPU ids (none for none): the container sees
    them, numbered from 0."""
    return [DeviceRequest(device_ids=list(devices), capabilities=[["gpu"]])] if devices else []
