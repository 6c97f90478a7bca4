"""A TCP forwarder on 127.0.0.1 that can be cut: a broker node that dies, without touching the broker.

Usage::

    with TcpProxy(5672) as node:
        url = f"amqp://guest:guest@127.0.0.1:{node.port}/%2F"
        ...
        node.cut()   # the listening socket and every forwarded connection close, as when a node is killed

While ``stalled`` is set, a new connection is accepted and never answered (a server that hangs).
"""

from __future__ import annotations

import socket
import threading
from types import TracebackType


class TcpProxy:
    """Forwards every connection on a free loopback port (or ``port``) to ``127.0.0.1:target_port``."""

    def __init__(self, target_port: int, port: int = 0) -> None:
        self.target_port = target_port
        self._listener = socket.create_server(("127.0.0.1", port))
        self.port: int = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._cut = False
        #: New connections are accepted and held, never forwarded nor answered, while this is set.
        self.stalled = False
        threading.Thread(target=self._accept, name="tcp-proxy", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # cut
            if self.stalled:
                with self._lock:
                    self._sockets.append(client)
                continue
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            with self._lock:
                if self._cut:
                    client.close()
                    upstream.close()
                    return
                self._sockets += [client, upstream]
            threading.Thread(target=self._pipe, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                try:
                    end.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def cut(self) -> None:
        """Close the listener and every forwarded connection: the "node" is gone, connects are refused."""
        with self._lock:
            self._cut = True
            sockets, self._sockets = self._sockets, []
        self._listener.close()
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def __enter__(self) -> "TcpProxy":
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.cut()
