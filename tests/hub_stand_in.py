"""A local stand-in for the Hugging Face Hub's upload API, reached through ``HF_ENDPOINT`` (tests only).

It answers the calls ``HfApi.create_repo`` and ``HfApi.upload_folder`` make: repo creation, the model card's YAML
validation, the pre-upload check
(every file is declared "regular", so its content travels base64-encoded inside the commit, with no LFS/Xet
storage), and the commit (NDJSON), and keeps the committed files in memory: ``repos[repo_id][path] = bytes``.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class HubStandIn:
    def __init__(self):
        self.repos: dict[str, dict[str, bytes]] = {}
        self.requests: list[tuple[str, str]] = []
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _reply(self, payload, status=200):
                body = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _body(self) -> bytes:
                return self.rfile.read(int(self.headers.get("Content-Length", 0)))

            def do_POST(self):
                stand_in.requests.append(("POST", self.path))
                body = self._body()
                if self.path == "/api/validate-yaml":
                    # The Hub checks the card's front matter: here, that it is a YAML mapping with a list of tags.
                    errors = stand_in.validate_card(json.loads(body)["content"])
                    return self._reply(
                        {"errors": [{"message": e} for e in errors], "warnings": []}, 400 if errors else 200
                    )
                if self.path == "/api/repos/create":
                    spec = json.loads(body)
                    repo_id = f"{spec['organization']}/{spec['name']}" if spec.get("organization") else spec["name"]
                    stand_in.repos.setdefault(repo_id, {})
                    return self._reply({"url": f"{stand_in.url}/{repo_id}", "name": repo_id})
                match = re.fullmatch(r"/api/models/(.+)/(preupload|commit)/([^/?]+)(\?.*)?", self.path)
                if match is None:
                    return self._reply({"error": f"unexpected {self.path}"}, status=404)
                repo_id, action = match.group(1), match.group(2)
                if action == "preupload":
                    files = json.loads(body)["files"]
                    return self._reply(
                        {"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False} for f in files]}
                    )
                for line in body.decode().splitlines():
                    item = json.loads(line)
                    if item.get("key") == "file":
                        value = item["value"]
                        stand_in.repos.setdefault(repo_id, {})[value["path"]] = base64.b64decode(value["content"])
                oid = "0" * 40
                return self._reply({"commitUrl": f"{stand_in.url}/{repo_id}/commit/{oid}", "commitOid": oid})

            def do_GET(self):
                stand_in.requests.append(("GET", self.path))
                return self._reply({"error": f"unexpected {self.path}"}, status=404)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @staticmethod
    def validate_card(content: str) -> list[str]:
        import yaml

        match = re.match(r"---\n(.*?)\n---\n", content, re.DOTALL)
        if match is None:
            return ["no YAML front matter"]
        try:
            metadata = yaml.safe_load(match.group(1))
        except yaml.YAMLError as err:
            return [f"invalid YAML: {err}"]
        if not isinstance(metadata, dict):
            return ["front matter is not a mapping"]
        if not isinstance(metadata.get("tags", []), list):
            return ["tags must be a list"]
        return []

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
