"""Who calls: the anonymous server, root, or a Django user (docs/operating.md#authentication).

What a principal may do with a project is decided in ``projects.access``; this is only
the caller's identity, which every surface and the MCP tool contract pass along.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from django.conf import settings

if TYPE_CHECKING:
    from django.contrib.auth.models import User


class OpenServerQuestion(Protocol):
    """Whether the server is open, for an anonymous caller let in before anyone asked
    (``projects.auth.OpenServerCheck``, which owns the rule, implements it)."""

    @property
    def answered(self) -> bool:
        """Whether the question was asked: by ``confirm`` or ``settle``."""

    def confirm(self) -> None:
        """Ask now, unless asked already; raise ``Unauthorized`` if the server is closed."""

    def settle(self, any_token: bool) -> None:
        """Take the answer a statement read on the way (whether any token exists);
        raise ``Unauthorized`` if the server is closed."""


@dataclass(frozen=True)
class Principal:
    """The caller of any surface: the anonymous server, root, or a Django user.

    An anonymous caller may come with ``open_server_check`` still to answer: it was let in
    before anyone asked whether authentication is on, which is asked as late as one round
    trip can be saved (docs/hot-path.md#levers-kept). ``confirmed`` answers it.
    """

    kind: str  # "anonymous" | "root" | "user"
    user: User | None = None
    open_server_check: OpenServerQuestion | None = field(default=None, compare=False, repr=False)
    # The keyed hash of the API token it came with, so a call that waits can be
    # authenticated again at every look (``projects.auth.principal_recheck``).
    token_hash: str | None = field(default=None, compare=False, repr=False)
    # The caller's address, which counts an anonymous server's waits (``wait_key``).
    address: str = field(default="", compare=False, repr=False)

    @classmethod
    def anonymous(
        cls, open_server_check: OpenServerQuestion | None = None, *, address: str = ""
    ) -> Principal:
        return cls(kind="anonymous", open_server_check=open_server_check, address=address)

    def confirmed(self) -> Principal:
        """This caller, once it is known to be let in: an anonymous caller's open-server
        question is asked now if nothing asked it yet (raises ``Unauthorized``)."""
        if self.open_server_check is not None:
            self.open_server_check.confirm()
        return self

    @property
    def unconfirmed(self) -> bool:
        """An anonymous caller whose open-server question is still to ask."""
        return self.open_server_check is not None and not self.open_server_check.answered

    @classmethod
    def root(cls) -> Principal:
        return cls(kind="root")

    @classmethod
    def for_user(cls, user: User, *, token_hash: str | None = None) -> Principal:
        # A Django superuser is root for access purposes (the web UI, admin-made users).
        return cls(kind="root" if user.is_superuser else "user", user=user, token_hash=token_hash)

    @property
    def key(self) -> str:
        """Who this caller is, as recorded on what it registers or must recognise as
        its own again: its sessions, the idempotency keys of its sends and the request
        ids of its pops (on an open project several users act as one project, so the
        project alone does not say whose retry it is).

        One key per Django user, one for the root token and one for an anonymous server,
        which has a single principal.
        """
        if self.user is not None:
            return f"user:{self.user.pk}"
        return self.kind

    @property
    def wait_key(self) -> str:
        """Whose parked calls count together against ``AI_MEMORY_MAX_WAITS_PER_CALLER``
        (docs/serving.md#caps): a user with all their tokens, root, or on an anonymous
        server a source address."""
        if self.kind == "anonymous":
            return f"address:{self.address}"
        return self.key

    @property
    def sees_everything(self) -> bool:
        return self.kind in ("anonymous", "root")

    @property
    def owner_name(self) -> str | None:
        """The name stamped as ``from_owner_user`` on what this caller sends."""
        if self.user is not None:
            return self.user.get_username()
        if self.kind == "root":
            return settings.AI_MEMORY_ROOT_USERNAME or None
        return None

    @property
    def display_name(self) -> str:
        if self.user is not None:
            return self.user.get_username()
        if self.kind == "root":
            return settings.AI_MEMORY_ROOT_USERNAME or "root"
        return "anonymous"
