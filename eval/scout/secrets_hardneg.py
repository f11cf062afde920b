import sys
sys.path.insert(0, "eval/scout")
import secrets_probe as sp
neg = [
 "Fixed in commit 3f786850e387550fdab836ed7e6dc881de23001b, see PR.",
 "sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
 "Note id 123e4567-e89b-12d3-a456-426614174000 in the db",
 "Open obsidian://open?vault=Work&file=Daily%2F2024-05-01 to jump there.",
 "![img](data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==)",
 "password: <your password here>",
 "Set `api_key = os.environ['API_KEY']` rather than hard-coding it.",
 "token: ${GITHUB_TOKEN}",
 "https://www.youtube.com/watch?v=dQw4w9WgXcQ&list=PLx0sYbCqOb8TBPRdmBHs5Iftvv9TPboYG",
 "The secret is to use tags sparingly.",
 "password = changeme",
]
name = sys.argv[1]
args = (["low", sys.argv[2:]] if name == "kingfisher" else [])
detect, label = sp.MAKERS[name](*args)
print(label)
for t in neg:
    for s, e, r in detect(t):
        print(f"  FP [{r}] {t[s:e]!r}")
