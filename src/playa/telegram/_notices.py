"""What the bot says of its own: its description, greetings, notes about messages it deleted,
turns a restart cut and a group's move to a supergroup, and the words around a question."""

from __future__ import annotations

from typing import Final

SORRY: Final = "Sorry, something went wrong with that message. It was logged; please try again."
DESCRIPTION: Final = (
    "I am a chat agent. Each chat with me has its own agent and workspace, and the chat's owner "
    "can connect their own remote MCP servers to it; their keys never reach the model.\n\n"
    "Add a server with /mcp_add <name> <url> --bearer (I ask for the token and delete your "
    "answer), list them with /mcp_list, and see every command with /help."
)
SHORT_DESCRIPTION: Final = "A chat agent whose owner connects their own remote MCP servers."
WELCOME: Final = (
    "Hello! I am this chat's agent: write to me, and I answer with the tools this chat has.\n\n"
    "You own this chat, so you can connect your own remote MCP servers to it:\n"
    "/mcp_add <name> <url> --bearer\n"
    "I then ask for the token, delete your answer, and keep the token out of the conversation.\n\n"
)
WELCOME_GROUP: Final = "Hello! I am this group's agent. Write to me, or use a command.\n\n"
INTERRUPTED: Final = (
    "I was restarted while working on this message, so it was not finished. Please send it again."
)
EDITED_SECRET: Final = (
    "An edited message in this chat held a credential. I deleted it, but others may have seen it: "
    "rotate that key. Edits are never run as commands; send the command as a new message."
)
EDITED_SECRET_KEPT: Final = (
    "An edited message in this chat holds a credential, and I could not delete it: delete it "
    "yourself and rotate that key. In a group I need the admin right to delete messages."
)
KEY_REFUSED: Final = (
    "That message looks like a key, so I deleted it and kept it from the conversation. "
    "To connect a server with it: /mcp_add <name> <url> --bearer, then send the key when I ask."
)
KEY_REFUSED_KEPT: Final = (
    "That message looks like a key. I kept it from the conversation but could not delete it: "
    "delete it yourself and rotate the key. To connect a server: /mcp_add <name> <url> --bearer."
)
MOVED: Final = (
    "This group is now a supergroup, with a new chat id. Its remote MCP servers, conversation "
    "and files came along: everything works as before."
)
NOT_MOVED: Final = (
    "This group is now a supergroup, with a new chat id, and that chat already had files of its "
    "own, so the old group's servers, conversation and files were not moved. Nothing was deleted."
)
MOVE_FAILED: Final = (
    "This group is now a supergroup, with a new chat id, and moving its servers, conversation "
    "and files there failed. It was logged; nothing was deleted."
)

# Around a question: how to answer it, where it went, and what came of it.
ANSWER_NOT_DELETED: Final = (
    "I could not delete your answer, and it holds a credential: delete it yourself, and rotate "
    "the key, since others may have seen it. In a group I need the admin right to delete messages."
)
ASK_HINT: Final = "\n\nPress Cancel, or send /cancel, to stop."
REPLY_HINT: Final = "\n\nAnswer by replying to this message."
CANCEL_HINT: Final = "Press Cancel, or send /cancel, to stop the question."
MOVED_HINT: Final = "This group is now a supergroup, so the question is asked again here.\n\n"
OPEN_LINK: Final = "Open the link"
LOOK_IN_PRIVATE: Final = "{asker} asks you to open a link. I sent it to you in our private chat: look there."
NO_PRIVATE_CHAT: Final = (
    "{asker} asks you to open a link, which I send only in a private chat, and I could not write to "
    "you there: open a chat with me and press Start, then try again. The question was cancelled."
)
ALLOW_ONCE: Final = "Allow once"
ALLOW_ALWAYS: Final = "Always for this tool"
DENY: Final = "Deny"
PERMISSION_OUTCOMES: Final = {
    "allow": "You allowed this call.",
    "always": "You allowed this call, and every call of this tool from now on.",
    "deny": "You denied this call.",
}
WAITS_FOR_OWNER: Final = "A tool call waits for the owner's permission; I asked them in our private chat."
OWNER_UNREACHABLE: Final = (
    "A tool call needs the owner's permission, and I could not ask them in our private chat (the owner "
    "opens a chat with me and presses Start), so it was not made."
)
