"""The event-type catalog: event types with a JSON Schema and examples, the validators
compiled from them (reused per schema version), and endpoint filters (compiled once).

``schemas`` checks a schema when it is written and a payload against it, ``mail_templates``
a type's email templates (checked when written, rendered for ``mailto:`` endpoints), ``filters`` the
Outpost-style filter language (and its index), ``operational`` the schemas of the types the
service raises, ``spec`` what an entry may hold as written, ``store`` the catalog's entries
(read and written by the API, the CLI, the console and the portal), ``registry`` the
per-process view ingestion validates against, ``files`` and ``cli`` a catalog as a JSON or
YAML file, ``documents`` the catalog as one JSON Schema document, ``examples`` test events
and filter tests, ``reading`` a schema as rows and the entries by group, for people.

What the portal calls: ``store.page``/``store.get``/``store.groups`` (the catalog to list;
the kit's ``pages/catalog.html`` shows it), ``examples.try_filter`` (a filter against an
event, and which condition failed), ``examples.send_example`` (the type's example to one
endpoint, as a test event), ``filters.compile_filter`` (``FilterError`` names the path of a
bad filter when the endpoint form is saved).

May import: ``storage``, ``messaging``, ``ingest`` (``examples`` accepts its test event
there) and the shared modules at the top; not the API, the console or the portal, which
call it.
"""
