"""Each record kind queries with its own schema, whatever kind the process used first.

Every model shares ``_Table``'s Meta; PynamoDB caches a connection (with the indexes it knows)
on the class it was asked on. A subclass without a connection of its own inherits ``_Table``'s,
whose schema has no indexes: the local stack's purge tick failed every second with "Table
vdq-local-items has no index: purge" when retention's stamping (``_Table.query``) ran first.
"""

import subprocess
import sys
import textwrap

from tests.support.calls import REPO


def test_a_record_kind_keeps_its_indexes_after_the_base_table_was_used_first():
    script = textwrap.dedent(
        """
        from vdq.store import models

        models.bind("vdq-test-items", "eu-west-1")
        models._Table._get_connection()  # retention's stamping queries the base kind first
        for model in models.MODELS:
            meta = model._get_connection().get_meta_table()
            for index in model._indexes:
                meta.get_index_hash_keyname(index)  # ValueError: has no index
        print("ok")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=REPO, timeout=60)  # fmt: skip
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
