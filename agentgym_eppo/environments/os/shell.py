"""The persistent-shell protocol both sandbox backends share.

One interactive ``bash --login`` per episode sits on a terminal (a pty for bubblewrap, a
``docker exec`` tty for Docker), so ``cd``, variables and background jobs persist between
turns, programs see a terminal as they do in AgentBench, and Ctrl-C interrupts a command
that runs too long. The terminal has echo off, no prompts and no history; each command
is sent as an ANSI-C quoted string (``$'...'``: no fork, any bytes, any syntax error
stays inside ``eval``) followed by a marker that carries a nonce drawn for that command
alone and the exit code::

    __agb=$'ls /\\nexit 3'
    eval "$__agb"; printf '\\036<nonce>\\036%d\\036\\n' "$?"; unset __agb

Everything before the marker is the command's output. The launcher wraps the shell so
that its death prints ``\\036<exit nonce>\\036exit\\036``: ``exit`` or ``kill -9 $$`` is
seen at once instead of as a timeout. The wrapper reads its exit nonce before the shell
starts, from the terminal (Docker) or a pipe (bubblewrap's control loop): no nonce is on
a command line or in an environment.

A marker cannot be made unforgeable from inside: the shell that prints it is the
agent's, and a ``DEBUG`` trap sees the marker's command, nonce included, just before it
runs. What a forged marker can do is bounded: it ends the *current* command early; its
rest and its real marker (a stale nonce, removed from the output) are read at the start
of the next command, which still ends at its own marker, whose nonce did not exist
before it was sent. So the agent can show its own output a step late, which a trap
that prints text before every command does anyway; it cannot end another command, and
no verdict reads the terminal (checks run as separate processes).
"""

from __future__ import annotations

import abc
import contextlib
import os
import re
import secrets
import select
import time
from collections.abc import Callable
from dataclasses import dataclass

_CHUNK = 768
"""Characters of quoted script per line: a terminal in canonical mode cuts lines at 4096."""

_ANSI = re.compile(rb"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f]")
_MARK = b"\x1e"
_ANY_MARKER = re.compile(rb"\x1e[0-9a-f]{16}\x1e(?:\d+|exit|sync)\x1e\n?")


class ShellClosed(RuntimeError):
    """The terminal's other end is gone: the sandbox died."""


class ShellStream(abc.ABC):
    """A byte stream to an interactive shell's terminal (pty master or docker socket)."""

    @abc.abstractmethod
    def fileno(self) -> int:
        """A descriptor that ``select`` reports readable when bytes (or EOF) arrive."""

    @abc.abstractmethod
    def read_available(self) -> bytes | None:
        """The bytes that can be read now: None if none yet, ``b""`` if the stream is closed."""

    @abc.abstractmethod
    def write(self, data: bytes) -> None:
        """Send ``data`` to the terminal (raises :class:`ShellClosed` if it is gone)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the stream."""


@dataclass(frozen=True)
class CommandResult:
    """What one command printed (cleaned text), its exit code, and how it ended.

    ``exit_code`` is None when the command did not finish (timeout) or the shell died.
    """

    output: str
    exit_code: int | None
    timed_out: bool = False
    shell_exited: bool = False


def encode_script(text: str) -> bytes:
    """``text`` as the bytes bash gets: UTF-8, a byte smuggled in as ``\\udc80``-``\\udcff``
    (``surrogateescape``) as that byte, any other lone surrogate (``"\\ud800"``, which JSON
    can carry) as its three UTF-8-style bytes: bash then sees odd bytes, as from a
    terminal, and the agent an ordinary observation, never an exception."""
    try:
        return text.encode("utf-8", errors="surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", errors="surrogatepass")


def quote_ansi_c(text: str) -> list[str]:
    """``text`` as tokens of a bash ``$'...'`` string body, printable ASCII only.

    One token per input byte, so that a caller can split the string between tokens
    without cutting an escape sequence in half.
    """
    tokens = []
    for byte in encode_script(text):
        if byte in (0x5C, 0x27):  # backslash, single quote
            tokens.append("\\" + chr(byte))
        elif 0x20 <= byte < 0x7F:
            tokens.append(chr(byte))
        elif byte == 0x0A:
            tokens.append("\\n")
        else:
            tokens.append(f"\\x{byte:02x}")
    return tokens


def _clean(raw: bytes) -> str:
    """A command's output without the markers of earlier commands (a forged marker ended
    one early and its real marker came later), as text."""
    return clean_output(_ANY_MARKER.sub(b"", raw))


def clean_output(raw: bytes) -> str:
    """Terminal bytes -> text: escape sequences, carriage returns and control bytes removed,
    invalid UTF-8 replaced (binary output becomes readable-ish text, never an exception)."""
    text = _ANSI.sub(b"", raw).replace(b"\r\n", b"\n").replace(b"\r", b"")
    return _CONTROL.sub("", text.decode("utf-8", errors="replace"))


class InteractiveShell:
    """Runs commands one at a time in a persistent interactive bash behind ``stream``.

    ``output_cap`` bounds what is kept of one command's output (a flood such as ``yes``
    is read and discarded, so the command is not blocked on a full terminal, until it
    ends or times out).
    """

    def __init__(self, stream: ShellStream, *, output_cap: int = 1 << 16) -> None:
        self.stream = stream
        self.output_cap = output_cap
        self.exited = False
        self._pending = b""
        self._exit_nonce = self.new_nonce()
        self._nonce = self.new_nonce()

    def forget(self) -> None:
        """Drop all state of a shell that was replaced (the sandbox restarted it)."""
        self.exited = False
        self._pending = b""
        self._exit_nonce = self.new_nonce()

    @staticmethod
    def new_nonce() -> str:
        return secrets.token_hex(8)

    @property
    def exit_nonce(self) -> str:
        """The nonce of the wrapper's exit marker, for a sandbox that hands it over with
        the shell's start (``setup(nonce_on_terminal=False)``)."""
        return self._exit_nonce

    def setup(self, timeout: float, *, stty: bool, nonce_on_terminal: bool = True) -> None:
        """Give the wrapper its exit nonce (the first line it reads from the terminal, unless
        the sandbox passed it on another way), silence the terminal (echo, prompts,
        history) and wait until the shell answers."""
        prefix = "stty -echo -onlcr 2>/dev/null; " if stty else ""
        self._nonce = self.new_nonce()
        line = (
            (f"{self._exit_nonce}\n" if nonce_on_terminal else "")
            + f"{prefix}PS1=''; PS2=''; PROMPT_COMMAND=''; unset HISTFILE; set +o history; "
            f"printf '\\036%s\\036sync\\036\\n' {self._nonce}\n"
        )
        self.stream.write(line.encode())
        output, kind = self._read_until_marker(time.monotonic() + timeout, keep=True)
        text = clean_output(output).strip()[-200:]
        said = f": {text}" if text else ""
        if kind is None:
            raise ShellClosed(f"the shell did not answer within {timeout:g} s{said}")
        if kind != b"sync":
            raise ShellClosed(f"the shell exited as it started{said}")

    def run(
        self, script: str, timeout: float, on_timeout: Callable[[], object] | None = None
    ) -> CommandResult:
        """Run ``script`` in the shell; interrupt it with Ctrl-C after ``timeout`` seconds.

        ``on_timeout`` runs right after the Ctrl-C (the sandbox kills the processes the
        command started, which Ctrl-C alone does not reach: background children, a fork
        bomb, a program that ignores SIGINT). Raises :class:`ShellClosed` when the sandbox is gone; a shell that
        exits (``exit``, ``kill -9 $$``) or stays stuck is a result with
        ``shell_exited=True``.
        """
        if self.exited:
            raise ShellClosed("the shell has exited")
        self._nonce = self.new_nonce()  # an earlier command's markers no longer end one
        self.stream.write(self._command_bytes(script))
        deadline = time.monotonic() + timeout
        output, kind = self._read_until_marker(deadline)
        while kind == b"sync":  # cannot answer this command's script: forged, read on
            more, kind = self._read_until_marker(deadline)
            output += more
        if kind is None:
            return self._interrupt(output, on_timeout)
        if kind == b"exit":
            self.exited = True
            return CommandResult(_clean(output), None, shell_exited=True)
        return CommandResult(_clean(output), int(kind))

    def _command_bytes(self, script: str) -> bytes:
        parts: list[str] = []
        current: list[str] = []
        size = 0
        for token in quote_ansi_c(script):
            if size + len(token) > _CHUNK:
                parts.append("".join(current))
                current, size = [], 0
            current.append(token)
            size += len(token)
        parts.append("".join(current))
        text = "__agb=$'" + parts[0] + "'\n"
        text += "".join("__agb+=$'" + part + "'\n" for part in parts[1:])
        text += (
            f'eval "$__agb"; printf \'\\036%s\\036%d\\036\\n\' {self._nonce} "$?"; unset __agb\n'
        )
        return text.encode()

    def _interrupt(self, output: bytes, on_timeout: Callable[[], object] | None) -> CommandResult:
        """Ctrl-C, the caller's clean-up, then sync markers until the shell answers.

        What the terminal prints after the Ctrl-C is dropped. The sync line is sent up to
        three times (a byte sent right after Ctrl-C can be lost while the shell handles
        the signal); no answer at all means the shell is stuck.
        """
        self.stream.write(b"\x03")
        time.sleep(0.02)
        if on_timeout is not None:
            on_timeout()
        sync = f"\nprintf '\\036%s\\036sync\\036\\n' {self._nonce}\n".encode()
        kind = None
        for _ in range(3):
            self.stream.write(sync)
            _, kind = self._read_until_marker(time.monotonic() + 1.5, keep=False)
            if kind is not None:
                break
        if kind == b"exit" or kind is None:
            self.exited = True
        return CommandResult(_clean(output), None, timed_out=True, shell_exited=kind != b"sync")

    def _read_until_marker(
        self, deadline: float, *, keep: bool = True
    ) -> tuple[bytes, bytes | None]:
        """Read until a marker or ``deadline``: (output up to the cap, marker kind or None)."""
        marker = re.compile(
            re.escape(_MARK)
            + b"(?:"
            + re.escape(self._nonce.encode())
            + re.escape(_MARK)
            + rb"(\d+|sync)|"
            + re.escape(self._exit_nonce.encode())
            + re.escape(_MARK)
            + b"(exit))"
            + re.escape(_MARK)
            + b"\n?"
        )
        kept = bytearray()
        capped = False
        buffer = self._pending
        self._pending = b""
        tail = 64
        while True:
            match = marker.search(buffer)
            if match:
                if keep and not capped:
                    kept += buffer[: match.start()]
                self._pending = buffer[match.end() :]
                return bytes(kept[: self.output_cap]), match.group(1) or match.group(2)
            # keep a tail that may hold the start of a split marker
            if len(buffer) > tail:
                head, buffer = buffer[:-tail], buffer[-tail:]
                if keep and not capped:
                    kept += head
                    if len(kept) > self.output_cap:
                        capped = True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if keep and not capped:
                    kept += buffer
                return bytes(kept[: self.output_cap]), None
            readable, _, _ = select.select([self.stream.fileno()], [], [], remaining)
            if not readable:
                continue
            chunk = self.stream.read_available()
            if chunk is None:
                continue
            if not chunk:
                raise ShellClosed("the sandbox's terminal closed")
            buffer += chunk


class FdStream(ShellStream):
    """A pty master file descriptor as a :class:`ShellStream` (bubblewrap backend)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        os.set_blocking(fd, False)

    def fileno(self) -> int:
        return self.fd

    def read_available(self) -> bytes | None:
        try:
            return os.read(self.fd, 1 << 16)
        except BlockingIOError:
            return None
        except OSError:  # EIO: every slave descriptor is closed
            return b""

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        deadline = time.monotonic() + 10.0
        while view:
            try:
                written = os.write(self.fd, view)
            except BlockingIOError:
                written = 0
            except OSError as error:
                raise ShellClosed(f"the sandbox's terminal closed ({error})") from None
            view = view[written:]
            if view:
                if time.monotonic() > deadline:
                    raise ShellClosed("the sandbox's terminal stopped reading input")
                select.select([], [self.fd], [], 0.1)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)
