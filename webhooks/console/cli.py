"""``flask staff create``, ``flask deliveries resend`` and ``flask dlq replay``: the console's actions for scripts."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable

import click
from flask import Flask, current_app

from webhooks import actions
from webhooks.console import audit, login_throttle, replay
from webhooks.console.auth import StaffError, create_staff, set_active, set_password, staff_named
from webhooks.console.models import ROLES, ReplayJob, StaffUser
from webhooks.console.queries import DeliveryFilter, FilterError
from webhooks.storage.db import connection
from webhooks.ingest.auth_keys import tenant_info
from webhooks.storage.models import Delivery, Tenant
from webhooks.storage.timeutil import isoformat, utcnow
from webhooks.storage.statuses import DeliveryStatus


def _read_password(from_stdin: bool) -> str:
    if from_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    return str(click.prompt("Password", hide_input=True, confirmation_prompt=True))


def _sessions(count: int) -> str:
    return f"{count} session{'s' if count != 1 else ''}"


def _change_staff(email: str, change: Callable[[StaffUser], str]) -> None:
    """Apply ``change`` to the staff account ``email`` and print what it says (an error if there is none)."""
    with connection():
        try:
            click.echo(change(staff_named(email)))
        except StaffError as error:
            raise click.ClickException(str(error)) from None


def _run_with_progress(job: ReplayJob) -> ReplayJob:
    """Run the job in the foreground with a progress bar on stderr."""
    settings = current_app.extensions["webhooks.settings"]
    with click.progressbar(length=job.total, label=f"replay job {job.id}", file=sys.stderr) as bar:
        shown = 0

        def progress(state: ReplayJob) -> None:
            nonlocal shown
            bar.update(state.done - shown)
            shown = state.done

        return replay.run_job(job.id, settings, progress)


def init_app(app: Flask) -> None:
    @app.cli.group("staff")
    def staff_group() -> None:
        """Support console accounts."""

    @staff_group.command("create")
    @click.argument("email")
    @click.option("--role", type=click.Choice(ROLES), default="viewer", show_default=True)
    @click.option("--password-stdin", is_flag=True, help="Read the password from the first line of stdin.")
    def staff_create(email: str, role: str, password_stdin: bool) -> None:
        """Create a staff account (the password is prompted for, or read from stdin)."""
        password = _read_password(password_stdin)
        with connection():
            try:
                user = create_staff(email, password, role)
            except StaffError as error:
                raise click.ClickException(str(error)) from None
        click.echo(json.dumps({"id": user.id, "email": user.email, "role": user.role}))

    @staff_group.command("set-password")
    @click.argument("email")
    @click.option("--password-stdin", is_flag=True, help="Read the password from the first line of stdin.")
    def staff_set_password(email: str, password_stdin: bool) -> None:
        """Give a staff account a new password; every session it has ends at once."""
        password = _read_password(password_stdin)

        def change(user: StaffUser) -> str:
            ended = set_password(user, password)
            login_throttle.unlock(user.email)
            return f"password changed; {_sessions(ended)} ended"

        _change_staff(email, change)

    @staff_group.command("disable")
    @click.argument("email")
    def staff_disable(email: str) -> None:
        """Deactivate a staff account: it cannot log in, and every session it has ends at once."""
        _change_staff(email, lambda user: f"{user.email} disabled; {_sessions(set_active(user, False))} ended")

    @staff_group.command("enable")
    @click.argument("email")
    def staff_enable(email: str) -> None:
        """Let a deactivated staff account log in again."""
        def enable(user: StaffUser) -> str:
            set_active(user, True)
            return f"{user.email} enabled"

        _change_staff(email, enable)

    @staff_group.command("unlock")
    @click.argument("email")
    def staff_unlock(email: str) -> None:
        """Let an account that reached the login limit try again now (its address limit stays)."""
        with connection():
            login_throttle.unlock(email.strip().lower())
        click.echo(f"{email.strip().lower()} may log in again")

    @staff_group.command("list")
    def staff_list() -> None:
        """Every staff account with its role and last login."""
        with connection():
            for user in StaffUser.select().order_by(StaffUser.email):
                state = "" if user.active else " (inactive)"
                click.echo(f"{user.email}\t{user.role}{state}\tlast login {isoformat(user.last_login_at) or 'never'}")

    @app.cli.group("deliveries")
    def deliveries_group() -> None:
        """Act on single deliveries."""

    @deliveries_group.command("resend")
    @click.argument("delivery_id")
    def deliveries_resend(delivery_id: str) -> None:
        """Queue a fresh attempt of DELIVERY_ID now (recorded in the audit log)."""
        with connection():
            delivery = Delivery.get_or_none(Delivery.id == delivery_id)
            if delivery is None:
                raise click.ClickException(f"no delivery {delivery_id}")
            try:
                delivery = actions.resend(delivery, requester=audit.cli_requester())
            except (actions.BrokerUnavailable, ValueError) as error:
                raise click.ClickException(str(error)) from None
            audit.record(audit.cli_actor(), "resend", "delivery", delivery.id, event_id=delivery.event_id)
        click.echo(json.dumps({"id": delivery.id, "status": delivery.status, "queued": True}))

    @app.cli.group("dlq")
    def dlq_group() -> None:
        """The dead letters: failed deliveries (the database is the list)."""

    @dlq_group.command("replay")
    @click.option("--tenant", default="", help="Tenant id or exact name.")
    @click.option("--endpoint", default="", help="Endpoint id.")
    @click.option("--event-type", default="", help="Event type.")
    @click.option("--since", default="", help="Created since: 24h, 30m or an ISO 8601 time (UTC).")
    @click.option("--resume", type=int, default=None, help="Carry on the replay job with this id instead.")
    def dlq_replay(tenant: str, endpoint: str, event_type: str, since: str, resume: int | None) -> None:
        """Replay every failed delivery that matches, with a progress bar (a job visible in the console)."""
        with connection():
            if resume is not None:
                job = ReplayJob.get_or_none(ReplayJob.id == resume)
                if job is None:
                    raise click.ClickException(f"no replay job {resume}")
            else:
                args = {"tenant": tenant, "endpoint_id": endpoint, "event_type": event_type, "since": since}
                try:
                    filters = DeliveryFilter.from_args(args, utcnow(), statuses=(DeliveryStatus.FAILED,))
                except FilterError as error:
                    raise click.BadParameter(str(error), param_hint=f"--{error.field.replace('_', '-')}") from None
                job = replay.create_job(filters, audit.cli_actor())
            audit.record(audit.cli_actor(), "replay_resume" if resume else "replay_all", "replay_job", str(job.id),
                         filters=DeliveryFilter.from_json(job.filters).describe(), total=job.total)
            tenants = [tenant_info(row) for row in
                       Tenant.select().where(Tenant.id.in_(DeliveryFilter.from_json(job.filters).tenant_ids))]
            for tenant in tenants:
                click.echo(f"replaying failed deliveries of tenant {tenant['name']} ({tenant['id']})", err=True)
            job = _run_with_progress(job)
        click.echo(json.dumps({"job": job.id, "status": job.status, "total": job.total, "done": job.done,
                               "error": job.error, "tenants": tenants}))
        if job.status != "done":
            raise SystemExit(1)
