// Links against the installed library and checks an error code, without a server.
#include <changefeed/changefeed.hpp>

#include <iostream>

int main() {
    try {
        auto p = changefeed::make_processor(changefeed::Collection("", "public.users"), "",
                                            [](const auto&, const auto&) {});
    } catch (const changefeed::Error& e) {
        if (e.code() == changefeed::errc::processor_name_empty) {
            std::cout << "ok: " << e.what() << "\n";
            return 0;
        }
    }
    std::cerr << "expected processor_name_empty\n";
    return 1;
}
